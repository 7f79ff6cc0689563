import type { Writable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { NotFoundError } from '../lib/errors.ts';
import { routineRouteLevel } from '../lib/log.ts';
import { objectPathProblem } from '../lib/object-path.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import type { BuiltinStore, ByteRange, StoredObject } from '../storage/builtin/index.ts';
import { CORS, PREFLIGHT, restrictCors } from './media-cors.ts';
import { sendTokenized, tokenRewriter } from './playlist-token.ts';

// `/media/<key>` serves what the built-in store holds (issue #27, spec/API.md section C) to
// players: HTTP Range (RFC 9110 section 14), validators and 304, CORS, and cache lifetimes
// that let a CDN keep segments for good. No API key: `authorize` (media-access.ts) says which
// keys are anyone's, which need a token (private playback, issue #28), and that the rest of
// the store (the pieces of a split task) is no one's to read here.

export interface MediaRoutesDeps {
  store: BuiltinStore;
  /** MEDIAPLANE_STORE_SERVE: stream through, or redirect to a presigned URL (stores with `presign`). */
  serve: 'proxy' | 'redirect';
  presignSeconds: number;
  /** Whether `req` may read `key` (media-access.ts): false is answered as a missing key (404). */
  authorize(key: string, req: FastifyRequest): Promise<MediaGrant | false>;
}

/**
 * What `authorize` lets through. Throwing refuses with that error instead (an AuthError: 401
 * saying why; a ForbiddenError: 403 for an origin the asset does not allow).
 */
export interface MediaGrant {
  /**
   * A private file opened by a token: answered `Cache-Control: private, no-store`; `token` is
   * the one that came as `?jwt=`, which a playlist's or storyboard's URIs then carry
   * (playlist-token.ts).
   */
  opened?: { token?: string };
  /** The origins the asset allows (media-cors.ts), the request's already checked; absent: any (`*`). */
  origins?: readonly string[];
}

const PREFIX = '/media/';

/**
 * The store key of a request's raw path, or undefined when it is none (a 404). Each segment is
 * decoded once, as mediaUrl (api/public-base.ts) encoded it; one that decodes to a `/`
 * (`%2f`), to nothing (`//`) or that is not valid percent-encoding is refused here, and the
 * decoded key then meets the path rule of every store (lib/object-path.ts: `.` and `..`,
 * backslashes, a `%` left after decoding such as `%252e`, control characters).
 */
export function mediaKey(rawUrl: string): string | undefined {
  const q = rawUrl.indexOf('?');
  const path = q < 0 ? rawUrl : rawUrl.slice(0, q);
  if (!path.startsWith(PREFIX)) return undefined;
  const segments: string[] = [];
  for (const raw of path.slice(PREFIX.length).split('/')) {
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return undefined;
    }
    if (segment === '' || segment.includes('/')) return undefined;
    segments.push(segment);
  }
  const key = segments.join('/');
  return objectPathProblem(key) ? undefined : key;
}

/** Content types by extension (RFC 8216 section 4 for HLS; video/iso.segment is IANA's for .m4s). */
const SERVED_TYPES: Record<string, string> = {
  m3u8: 'application/vnd.apple.mpegurl',
  mpd: 'application/dash+xml',
  ts: 'video/mp2t',
  m4s: 'video/iso.segment',
  mp4: 'video/mp4',
  m4a: 'audio/mp4',
  vtt: 'text/vtt; charset=utf-8',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
  json: 'application/json',
};
const PLAYLIST = new Set(['m3u8', 'mpd']);

/** The extension of a key's file name, lower case; '' when it has none. */
function extensionOf(key: string): string {
  const name = key.slice(key.lastIndexOf('/') + 1);
  const dot = name.lastIndexOf('.');
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
}

/** The content type of a key (or file name), by its extension; live-media-routes.ts serves by it too. */
export const contentTypeOf = (key: string): string => SERVED_TYPES[extensionOf(key)] ?? 'application/octet-stream';

/** Content type, cache lifetime and disposition of a key, by its extension. */
function presentation(key: string): Record<string, string> {
  const ext = extensionOf(key);
  return {
    'content-type': contentTypeOf(key),
    // A playlist may be written again (a rendition added); segments, MP4s and images under a
    // key never change once whole (the writer renames them in), so a CDN may keep them.
    'cache-control': PLAYLIST.has(ext) ? 'public, max-age=5' : 'public, max-age=31536000, immutable',
    // An asset's source (`asset/<playbackId>/source`) has no extension and is a download.
    ...(ext === '' ? { 'content-disposition': 'attachment' } : {}),
  };
}

/**
 * What a Range header asks of an object of `size` bytes: one range, the whole object (no
 * header, one that is not valid, or several ranges: RFC 9110 lets a server answer those 200
 * in whole), or nothing it holds (416).
 */
export function requestedRange(header: string | undefined, size: number): ByteRange | 'whole' | 'unsatisfiable' {
  const m = header === undefined ? null : /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  const [first, last] = [m?.[1] ?? '', m?.[2] ?? ''];
  if (first === '' && last === '') return 'whole';
  if (first === '') {
    // A suffix: the last n bytes (RFC 9110 section 14.1.1); `-0` asks for none of them.
    const n = Number(last);
    return n === 0 || size === 0 ? 'unsatisfiable' : { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return 'whole';
  if (start >= size) return 'unsatisfiable';
  return { start, end: last === '' ? size - 1 : Math.min(Number(last), size - 1) };
}

const opaque = (tag: string): string => (tag.startsWith('W/') ? tag.slice(2) : tag);

/** If-None-Match (weak comparison), else If-Modified-Since: whether the client's copy is current. */
function notModified(req: FastifyRequest, obj: StoredObject): boolean {
  const inm = req.headers['if-none-match'];
  if (inm !== undefined) return inm.split(',').some((t) => t.trim() === '*' || opaque(t.trim()) === opaque(obj.etag));
  const ims = Date.parse(req.headers['if-modified-since'] ?? '');
  return !Number.isNaN(ims) && Math.floor(obj.lastModified.getTime() / 1000) * 1000 <= ims;
}

/** If-Range: a Range applies only to the version the client names (strong ETag or exact date). */
function rangeStillValid(req: FastifyRequest, obj: StoredObject): boolean {
  const v = req.headers['if-range'];
  if (v === undefined) return true;
  if (typeof v !== 'string') return false;
  if (v.startsWith('"') || v.startsWith('W/')) return v === obj.etag && !v.startsWith('W/');
  return Date.parse(v) === Math.floor(obj.lastModified.getTime() / 1000) * 1000;
}

const SCHEMA = {
  summary: 'A file of the built-in store (HLS playlists and segments, MP4s, thumbnails, sources)',
  security: [],
  description:
    "The path after /media/ is the key, as playbackUrl, downloadUrl and output urls give it: an asset's files (asset/<playbackId>/...) and the outputs of a transcode without storage (task/<taskId>/...); any other key is a 404. No API key. Single byte ranges (`Range: bytes=a-b`, `a-`, `-n`) answer 206, a range past the end 416; ETag with If-None-Match and Last-Modified with If-Modified-Since answer 304; If-Range is honoured. CORS allows any origin, unless the asset's playbackPolicy has allowedOrigins: then a request whose Origin is not listed is a 403, a listed one is echoed with Vary: Origin, and one without an Origin (a native player) is answered. Playlists are cached 5 s, everything else for a year (immutable). With MEDIAPLANE_STORE_SERVE=redirect and a bucket store the answer is a 302 to a presigned URL of the bucket. A key that breaks the path rules is a 404. The files of an asset with playbackPolicy jwt need a JWT signed by one of its owner's signing keys, as ?jwt= or the Livepeer-Jwt header (401 without, saying why); a playlist or the storyboard (thumbnails.vtt) opened with ?jwt= lists its URIs with the token, so any HLS player given one URL plays.",
  response: {
    200: { description: 'The whole file', content: { '*/*': { schema: { type: 'string', format: 'binary' } } } },
    206: { description: 'The range asked for', content: { '*/*': { schema: { type: 'string', format: 'binary' } } } },
    302: { description: 'A presigned URL of the bucket (MEDIAPLANE_STORE_SERVE=redirect)', type: 'null' },
    304: { description: 'The client holds this version', type: 'null' },
    401: { ...TasksErrorBody, description: 'A private asset (playbackPolicy jwt) without a valid JWT: why' },
    403: { ...TasksErrorBody, description: "An Origin the asset's playbackPolicy.allowedOrigins does not list" },
    404: TasksErrorBody,
    416: TasksErrorBody,
  },
};

/** `GET|HEAD /media/<key>`: what the built-in store holds (spec/API.md section C). */
export async function mediaRoutes(app: FastifyInstance, deps: MediaRoutesDeps): Promise<void> {
  // Each segment a player fetches is a request: their lines are written only when the
  // operator asked for debug logging; failures (5xx) are still logged.
  const logLevel = routineRouteLevel(app.log.level);
  app.route({
    method: ['GET', 'HEAD'],
    url: `${PREFIX}*`,
    logLevel,
    schema: SCHEMA,
    handler: (req, reply) => serve(req, reply, deps),
  });
  app.options(
    `${PREFIX}*`,
    { logLevel, schema: { summary: 'CORS preflight of /media/ (GET, HEAD, the Range header)', security: [] } },
    async (_req, reply) => reply.code(204).headers(PREFLIGHT).send(),
  );
}

async function serve(req: FastifyRequest, reply: FastifyReply, deps: MediaRoutesDeps): Promise<FastifyReply> {
  reply.headers(CORS);
  const key = mediaKey(req.url);
  if (key === undefined) throw new NotFoundError();
  // A key the client may not read is answered as one that does not exist.
  const grant = await deps.authorize(key, req);
  if (grant === false) throw new NotFoundError();
  if (grant.origins) restrictCors(reply, req.headers.origin);
  const { opened } = grant;
  // A private playlist or storyboard is served through, never redirected: its URIs resolve
  // against this service, and one opened with ?jwt= is rewritten to carry the token.
  const rewrite = opened && tokenRewriter(key);
  if (opened && rewrite) {
    const contentType = presentation(key)['content-type'] ?? 'application/octet-stream';
    return sendTokenized(req, reply, { store: deps.store, key, token: opened.token, contentType, rewrite });
  }
  if (deps.serve === 'redirect' && deps.store.presign) {
    // Each answer signs anew (the authorize check above is per request): never cached.
    const url = await deps.store.presign(key, deps.presignSeconds);
    return reply.code(302).headers({ location: url, 'cache-control': 'no-store' }).send();
  }
  const obj = await deps.store.stat(key);
  if (!obj) throw new NotFoundError();
  reply.headers({
    ...presentation(key),
    // A private file opened by a token is the viewer's alone: no shared cache may keep it.
    ...(opened ? { 'cache-control': 'private, no-store' } : {}),
    etag: obj.etag,
    'last-modified': obj.lastModified.toUTCString(),
    'accept-ranges': 'bytes',
  });
  if (notModified(req, obj)) return reply.code(304).send();
  // Range is defined for GET only (RFC 9110 section 14.2): HEAD describes the whole file.
  const wanted = req.method === 'GET' && rangeStillValid(req, obj) ? req.headers.range : undefined;
  const range = requestedRange(wanted, obj.size);
  if (range === 'unsatisfiable')
    return reply
      .code(416)
      .headers({ 'content-range': `bytes */${obj.size}`, 'content-type': 'application/json; charset=utf-8' })
      .send({ errors: [`the range is outside the file (${obj.size} bytes)`] });
  if (range !== 'whole') reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${obj.size}`);
  const length = range === 'whole' ? obj.size : range.end - range.start + 1;
  reply.header('content-length', String(length));
  if (req.method === 'HEAD' || length === 0) return reply.send();
  if (deps.store.writeTo) {
    const part = range === 'whole' ? { start: 0, end: obj.size - 1 } : range;
    return writeBody(reply, (out) => deps.store.writeTo?.(key, part, out));
  }
  return reply.send(await open(deps.store, key, range === 'whole' ? undefined : range, reply));
}

/**
 * The headers as set, then a body the store writes itself (`writeTo`, buffers used again)
 * past Fastify's send; onResponse hooks (metrics) still run when the answer finishes. A
 * failure midway can only cut the connection: the client sees fewer bytes than announced.
 */
async function writeBody(
  reply: FastifyReply,
  write: (out: Writable) => Promise<void> | undefined,
): Promise<FastifyReply> {
  reply.hijack();
  const res = reply.raw;
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) res.setHeader(name, value);
  res.writeHead(reply.statusCode);
  try {
    await write(res);
    res.end();
  } catch (err) {
    // A client that went away is no failure of ours.
    if (!res.destroyed) reply.log.warn({ err }, 'a /media answer failed midway');
    res.destroy();
  }
  return reply;
}

/**
 * The store's stream of `key`, aborted when the client goes away before the end: Fastify
 * destroys the stream then, and the signal also stops a bucket's GetObject still connecting.
 */
async function open(store: BuiltinStore, key: string, range: ByteRange | undefined, reply: FastifyReply) {
  const gone = new AbortController();
  const onClose = (): void => {
    if (!reply.raw.writableFinished) gone.abort();
  };
  reply.raw.once('close', onClose);
  return store.read(key, range, gone.signal);
}
