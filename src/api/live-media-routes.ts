import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest, LogLevel } from 'fastify';
import { readAtMostEvery } from '../lib/recent-reads.ts';
import { NotFoundError } from '../lib/errors.ts';
import { routineRouteLevel } from '../lib/log.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import type { LiveLadder, LivePlayback, RemoteLadders, StreamStore } from '../live/index.ts';
import { type MediaAccessDeps, policyGrant } from './media-access.ts';
import { CORS, restrictCors } from './media-cors.ts';
import { contentTypeOf, type MediaGrant } from './media-routes.ts';

// The low-latency HLS of live streams (Apple's LL-HLS, RFC 8216bis) under
// /media/live/{playbackId}/: the multivariant playlist, each rendition's media playlist with
// blocking reloads (_HLS_msn, _HLS_part: 6.2.5.2), its init segment, segments and parts, from
// the ladder live on this node, else from the node of the cluster holding it (404 when none
// does). CORS and the JWT playback policy are those
// of /media (media-cors.ts, media-access.ts), checked on every request; a playlist opened with
// ?jwt= lists every URI with it (the rendition's uriQuery). The CORS preflight is /media's.

export interface LiveMediaDeps extends Pick<MediaAccessDeps, 'signingKeys' | 'jwtMaxLifetimeSecs'> {
  streams: Pick<StreamStore, 'byPlaybackId'>;
  /** The live runtime of this node; absent: nothing is live here. */
  live?: LivePlayback | undefined;
  /** The ladders live on other nodes (with a cluster secret): asked when the ladder is not live here. */
  remote?: RemoteLadders | undefined;
  /** How long a stream's row (its playback policy) is used before it is read again; default 1 s. */
  streamReadMs?: number;
}

const PREFIX = '/media/live/:playbackId';
const Ids = { playbackId: Type.String({ maxLength: 64 }) };
const Rendition = Type.String({ maxLength: 64, description: 'A profile name, or source' });
const LadderParams = Type.Object(Ids);
const PlaylistParams = Type.Object({ ...Ids, rendition: Rendition });
const FileParams = Type.Object({
  ...Ids,
  rendition: Rendition,
  // Which names a rendition writes is llhls/'s knowledge: a name it does not know is a 404 there.
  file: Type.String({ maxLength: 40, description: 'init-{run}.mp4, {msn}.m4s or {msn}.{part}.m4s' }),
});
const Reload = Type.Object({
  _HLS_msn: Type.Optional(
    Type.Integer({ minimum: 0, description: 'Blocking reload: answer once this segment is there.' }),
  ),
  _HLS_part: Type.Optional(
    Type.Integer({ minimum: 0, description: 'With _HLS_msn: answer once this part of it is there.' }),
  ),
  _HLS_skip: Type.Optional(Type.String({ maxLength: 8, description: 'Ignored: playlists are never shortened.' })),
  jwt: Type.Optional(Type.String({ maxLength: 8192 })),
});
type Reload = Static<typeof Reload>;
const Jwt = Type.Object({ jwt: Type.Optional(Type.String({ maxLength: 8192 })) });

const JWT_WORDS =
  "A stream with playbackPolicy jwt needs a JWT signed by one of its owner's signing keys on every request, as ?jwt= (then every URI in the playlists carries it) or the Livepeer-Jwt header; the token is checked on each request, so a viewing outlasts the token only if the player gets a fresh one: sign tokens that last the viewing (at most MEDIAPLANE_JWT_MAX_LIFETIME_SECS when the operator bounds them), or load the playlist again with a new ?jwt=.";
const ANSWERS = {
  200: { description: 'The playlist or file', content: { '*/*': { schema: { type: 'string' } } } },
  400: { ...TasksErrorBody, description: 'A blocking reload too far ahead of the live edge' },
  401: { ...TasksErrorBody, description: 'A private stream without a valid JWT: why' },
  403: { ...TasksErrorBody, description: "An Origin the stream's playbackPolicy.allowedOrigins does not list" },
  404: { ...TasksErrorBody, description: 'Not live on this node, or no such rendition or file' },
  503: {
    ...TasksErrorBody,
    description: 'What was waited for did not come within the hold limit (3 target durations)',
  },
};

export const PLAYLIST_HEADERS = { 'content-type': contentTypeOf('index.m3u8'), 'cache-control': 'no-cache' };
/** Parts, segments and init segments never change under their name (a restart's init is init-{run}.mp4). */
export const MEDIA_CACHE = 'public, max-age=31536000, immutable';

/** An AbortSignal that fires when the client goes away before its answer is sent. */
export function clientGone(reply: FastifyReply): AbortSignal {
  const gone = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) gone.abort();
  });
  return gone.signal;
}

/** The URI query a playlist's URIs carry: the token the request came with as ?jwt=. */
const uriQueryOf = (grant: MediaGrant): string | undefined =>
  grant.opened?.token === undefined ? undefined : `jwt=${encodeURIComponent(grant.opened.token)}`;

type Open = (
  req: FastifyRequest<{ Params: { playbackId: string } }>,
  reply: FastifyReply,
) => Promise<{ ladder: LiveLadder; grant: MediaGrant }>;

/** The ladder live here or on another node, when the request may read it (404 otherwise; a refused token or origin throws). */
function opener(deps: LiveMediaDeps): Open {
  // Read at most once a second per playbackId however many viewers ask: a playback policy
  // changed by PATCH holds within a second. The token itself is checked on every request.
  const streamOf = readAtMostEvery((id) => deps.streams.byPlaybackId(id), { keepMs: deps.streamReadMs ?? 1000 });
  return async (req, reply) => {
    reply.headers(CORS);
    const { playbackId } = req.params;
    const ladder = deps.live?.ladder(playbackId) ?? (await deps.remote?.ladder(playbackId));
    if (!ladder) throw new NotFoundError();
    const stream = await streamOf(req.params.playbackId);
    if (!stream) throw new NotFoundError();
    const guarded = {
      kind: 'stream',
      playbackId: stream.playbackId,
      owner: stream.owner,
      playbackPolicy: stream.playbackPolicy,
    } as const;
    const grant = await policyGrant(deps, guarded, req);
    if (grant === false) throw new NotFoundError();
    if (grant.origins) restrictCors(reply, req.headers.origin);
    return { ladder, grant };
  };
}

const schema = (summary: string, params: object, querystring: object = Jwt) => ({
  summary,
  description: JWT_WORDS,
  security: [],
  params,
  querystring,
  response: ANSWERS,
});

/** GET|HEAD /media/live/{playbackId}/...: a live stream's low-latency HLS. */
export async function liveMediaRoutes(app: FastifyInstance, deps: LiveMediaDeps): Promise<void> {
  const logLevel = routineRouteLevel(app.log.level);
  const open = opener(deps);
  playlistRoutes(app, { open, logLevel });
  fileRoute(app, { open, logLevel });
}

function playlistRoutes(app: FastifyInstance, { open, logLevel }: { open: Open; logLevel: LogLevel }): void {
  app.route<{ Params: Static<typeof LadderParams>; Querystring: Static<typeof Jwt> }>({
    method: ['GET', 'HEAD'],
    url: `${PREFIX}/index.m3u8`,
    logLevel,
    schema: schema("A live stream's multivariant playlist (once every rendition has its first part)", LadderParams),
    handler: async (req, reply) => {
      const { ladder, grant } = await open(req, reply);
      const text = await multivariantOf(ladder, uriQueryOf(grant), clientGone(reply));
      if (text === undefined) return unavailable(reply, "the stream's renditions have not started yet");
      return sendPlaylist(req, reply, grant, text);
    },
  });

  app.route<{ Params: Static<typeof PlaylistParams>; Querystring: Reload }>({
    method: ['GET', 'HEAD'],
    url: `${PREFIX}/:rendition/index.m3u8`,
    logLevel,
    schema: schema(
      "A rendition's media playlist; _HLS_msn/_HLS_part hold it until that part is there",
      PlaylistParams,
      Reload,
    ),
    handler: async (req, reply) => {
      const { ladder, grant } = await open(req, reply);
      const rendition = ladder.rendition(req.params.rendition);
      if (!rendition) throw new NotFoundError();
      const { _HLS_msn: msn, _HLS_part: part } = req.query;
      const uriQuery = uriQueryOf(grant);
      const answer = await rendition.playlist({
        ...(msn === undefined ? {} : { msn }),
        ...(part === undefined ? {} : { part }),
        ...(uriQuery === undefined ? {} : { uriQuery }),
        signal: clientGone(reply),
      });
      if (answer.status !== 200) return refuse(reply, answer.status, answer.reason);
      return sendPlaylist(req, reply, grant, answer.body);
    },
  });
}

function fileRoute(app: FastifyInstance, { open, logLevel }: { open: Open; logLevel: LogLevel }): void {
  app.route<{ Params: Static<typeof FileParams>; Querystring: Static<typeof Jwt> }>({
    method: ['GET', 'HEAD'],
    url: `${PREFIX}/:rendition/:file`,
    logLevel,
    schema: schema(
      "A rendition's init segment (init-{run}.mp4), segment ({msn}.m4s) or part ({msn}.{part}.m4s)",
      FileParams,
    ),
    handler: async (req, reply) => {
      const { ladder, grant } = await open(req, reply);
      const bytes = await ladder.rendition(req.params.rendition)?.file(req.params.file, clientGone(reply));
      if (!bytes) throw new NotFoundError();
      reply.headers({
        'content-type': contentTypeOf(req.params.file),
        'cache-control': grant.opened ? 'private, no-store' : MEDIA_CACHE,
        'content-length': String(bytes.length),
      });
      return req.method === 'HEAD' ? reply.send() : reply.send(bytes);
    },
  });
}

/**
 * The multivariant playlist, waiting (without timers of its own) for every rendition's first
 * part: each rendition's plain playlist request answers once its first part is there, or at
 * its hold limit. A ladder on another node lists no renditions here: its holder waited already.
 */
export async function multivariantOf(ladder: LiveLadder, uriQuery: string | undefined, signal: AbortSignal) {
  const now = await ladder.multivariant(uriQuery);
  const renditions = ladder.renditions();
  if (now !== undefined || renditions.length === 0) return now;
  await Promise.all(renditions.map((r) => r.playlist({ signal })));
  return ladder.multivariant(uriQuery);
}

function sendPlaylist(req: FastifyRequest, reply: FastifyReply, grant: MediaGrant, text: string) {
  const body = Buffer.from(text, 'utf8');
  reply.headers({
    ...PLAYLIST_HEADERS,
    // A playlist opened by a token is the viewer's alone.
    ...(grant.opened ? { 'cache-control': 'private, no-store' } : {}),
    'content-length': String(body.length),
  });
  return req.method === 'HEAD' ? reply.send() : reply.send(body);
}

export function refuse(reply: FastifyReply, status: 400 | 404 | 503, reason: string) {
  if (status === 404) throw new NotFoundError();
  return reply
    .code(status)
    .header('cache-control', 'no-cache')
    .send({ errors: [reason] });
}

/** Not ready within the hold limit: a player asks again (hls.js retries a manifest that failed). */
export const unavailable = (reply: FastifyReply, reason: string) =>
  refuse(reply.header('retry-after', '1'), 503, reason);
