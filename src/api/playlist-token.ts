import type { FastifyReply, FastifyRequest } from 'fastify';
import { InternalError, NotFoundError } from '../lib/errors.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';

// Private playback with any HLS player (issue #28). A player resolves a playlist's relative
// URIs against the playlist's URL, query left out (RFC 3986 section 5.2), so a token given
// once as `?jwt=` would open the master playlist and nothing after it: hls.js in a page sends
// no Livepeer-Jwt header unless it is configured to (xhrSetup), and Safari's native player
// never. So a playlist opened by a `?jwt=` token is answered with that token on every URI it
// names (variant and rendition playlists, segments, init maps, keys, subtitles), each of
// which then carries it on. Absolute URIs (another host) are left alone: the token goes to
// this service only. Such answers are the viewer's own: `private, no-store`, no validators.
// The storyboard (thumbnails.vtt, the playback info's `Thumbnails`) names its sprite images
// the same way, relative to itself, and is rewritten alike.

/** A playlist of a long VOD is a few hundred KiB; far more is no playlist this service wrote. */
const MAX_PLAYLIST_BYTES = 16 * 1024 * 1024;

/** `uri` with `jwt=<token>` in its query, unless it is absolute (a scheme, or `//host`). */
export function withToken(uri: string, token: string): string {
  if (/^[a-z][a-z0-9+.-]*:/i.test(uri) || uri.startsWith('//')) return uri;
  const hash = uri.indexOf('#');
  const [path, fragment] = hash < 0 ? [uri, ''] : [uri.slice(0, hash), uri.slice(hash)];
  return `${path}${path.includes('?') ? '&' : '?'}jwt=${encodeURIComponent(token)}${fragment}`;
}

/**
 * The playlist with every URI carrying the token (RFC 8216 section 4.1: a line is a URI, a
 * tag, a comment or blank; tags name URIs in a quoted URI attribute). Line ends kept as they are.
 */
export function tokenizePlaylist(text: string, token: string): string {
  return text
    .split('\n')
    .map((line) => {
      const cr = line.endsWith('\r') ? '\r' : '';
      const content = cr ? line.slice(0, -1) : line;
      const trimmed = content.trim();
      if (trimmed === '') return line;
      if (!trimmed.startsWith('#')) return `${withToken(trimmed, token)}${cr}`;
      if (!trimmed.startsWith('#EXT')) return line;
      return content.replace(/\bURI="([^"]*)"/g, (_m, uri: string) => `URI="${withToken(uri, token)}"`) + cr;
    })
    .join('\n');
}

/**
 * A storyboard cue's payload: one image URI, relative or absolute, maybe with a media fragment
 * (`sprite-0.jpg#xywh=0,0,160,90`, W3C Media Fragments). Subtitle text never has this shape.
 */
const IMAGE_CUE = /^[^\s?#]+\.(?:jpe?g|png|webp)(?:#[^\s]*)?$/i;

/** A WebVTT storyboard with every image URI carrying the token; other lines (timings, text) kept. */
export function tokenizeStoryboard(text: string, token: string): string {
  return text
    .split('\n')
    .map((line) => {
      const cr = line.endsWith('\r') ? '\r' : '';
      const trimmed = (cr ? line.slice(0, -1) : line).trim();
      return IMAGE_CUE.test(trimmed) ? `${withToken(trimmed, token)}${cr}` : line;
    })
    .join('\n');
}

/** How a file that names others is rewritten to carry a `?jwt=` token, by its key; undefined: served as stored. */
export function tokenRewriter(key: string): ((text: string, token: string) => string) | undefined {
  const lower = key.toLowerCase();
  if (lower.endsWith('.m3u8')) return tokenizePlaylist;
  if (lower.endsWith('.vtt')) return tokenizeStoryboard;
  return undefined;
}

/** The whole object (a playlist: small, checked against MAX_PLAYLIST_BYTES first). */
async function readWhole(store: BuiltinStore, key: string): Promise<Buffer | undefined> {
  const obj = await store.stat(key);
  if (!obj) return undefined;
  if (obj.size > MAX_PLAYLIST_BYTES)
    throw new InternalError(`the playlist ${key} is larger than ${MAX_PLAYLIST_BYTES} bytes`);
  const chunks: Buffer[] = [];
  for await (const chunk of await store.read(key)) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/**
 * GET|HEAD of a private asset's HLS playlist or storyboard: in whole (no ranges: a player
 * reads them whole), rewritten by `rewrite` to carry `token` when it came as `?jwt=` (as
 * stored when it came as the header, which its player sends again), never cached by anyone
 * but the viewer.
 */
export async function sendTokenized(
  req: FastifyRequest,
  reply: FastifyReply,
  o: {
    store: BuiltinStore;
    key: string;
    token: string | undefined;
    contentType: string;
    rewrite: (text: string, token: string) => string;
  },
): Promise<FastifyReply> {
  const stored = await readWhole(o.store, o.key);
  if (!stored) throw new NotFoundError();
  const body = o.token === undefined ? stored : Buffer.from(o.rewrite(stored.toString('utf8'), o.token), 'utf8');
  reply.headers({
    'content-type': o.contentType,
    'cache-control': 'private, no-store',
    'content-length': String(body.length),
  });
  return req.method === 'HEAD' ? reply.send() : reply.send(body);
}
