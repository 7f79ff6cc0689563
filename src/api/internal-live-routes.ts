import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { secretMatches } from '../lib/bearer.ts';
import { AuthError, NotFoundError } from '../lib/errors.ts';
import { routineRouteLevel } from '../lib/log.ts';
import { INTERNAL_LIVE_PREFIX, type LiveLadder, type LivePlayback } from '../live/index.ts';
import { clientGone, MEDIA_CACHE, multivariantOf, PLAYLIST_HEADERS, refuse, unavailable } from './live-media-routes.ts';
import { contentTypeOf } from './media-routes.ts';

// What a node answers the other nodes of its cluster from the ladders live on it: the same
// names as /media/live/ under /internal/live/{playbackId}/, for a viewer's node that serves
// them (live/cluster RemotePlayback). Only with `Authorization: Bearer <cluster secret>`,
// compared in constant time (lib/bearer.ts); the viewer's node checked the playback policy,
// so the playlists here carry no token; and the cut of a publisher held here, asked by the
// node a terminate, suspend or delete came to. Without a secret set, the routes are not there (404).
// They have no schema: they stay out of the public OpenAPI document.

export interface InternalLiveDeps {
  /** MEDIAPLANE_CLUSTER_SECRET; unset: no internal routes. */
  secret: string | undefined;
  /** The live runtime of this node; absent: every internal request is a 404. */
  live?: LivePlayback | undefined;
}

type Params = { playbackId: string; rendition?: string; file?: string };
type Query = { _HLS_msn?: string; _HLS_part?: string };

/** GET /internal/live/{playbackId}/...: this node's ladders, for the other nodes. */
export async function internalLiveRoutes(app: FastifyInstance, deps: InternalLiveDeps): Promise<void> {
  const { secret } = deps;
  if (!secret) return;
  const logLevel = routineRouteLevel(app.log.level);
  const ladderOf = (req: FastifyRequest<{ Params: Params }>): LiveLadder => {
    if (!secretMatches(req.headers.authorization, secret)) throw new AuthError('the cluster secret is required');
    const ladder = deps.live?.ladder(req.params.playbackId);
    if (!ladder) throw new NotFoundError();
    return ladder;
  };
  const prefix = `${INTERNAL_LIVE_PREFIX}/:playbackId`;
  app.get<{ Params: Params }>(`${prefix}/index.m3u8`, { logLevel }, async (req, reply) => {
    const text = await multivariantOf(ladderOf(req), undefined, clientGone(reply));
    if (text === undefined) return unavailable(reply, "the stream's renditions have not started yet");
    return reply.headers(PLAYLIST_HEADERS).send(text);
  });
  app.get<{ Params: Params; Querystring: Query }>(`${prefix}/:rendition/index.m3u8`, { logLevel }, (req, reply) =>
    playlist(ladderOf(req), req, reply),
  );
  // A terminate, suspend or delete asked of another node: the publisher held here is cut off.
  app.post<{ Params: Params; Body: unknown }>(`${prefix}/terminate`, async (req, reply) => {
    ladderOf(req);
    const { streamId, reason } = (req.body ?? {}) as { streamId?: unknown; reason?: unknown };
    if (typeof streamId !== 'string' || typeof reason !== 'string') return refuse(reply, 400, 'streamId and reason');
    if (!deps.live?.terminate(streamId, reason.slice(0, 200))) throw new NotFoundError();
    return reply.code(204).send();
  });
  app.get<{ Params: Params }>(`${prefix}/:rendition/:file`, { logLevel }, async (req, reply) => {
    const file = req.params.file ?? '';
    const bytes = await ladderOf(req)
      .rendition(req.params.rendition ?? '')
      ?.file(file, clientGone(reply));
    if (!bytes) throw new NotFoundError();
    return reply.headers({ 'content-type': contentTypeOf(file), 'cache-control': MEDIA_CACHE }).send(bytes);
  });
}

async function playlist(
  ladder: LiveLadder,
  req: FastifyRequest<{ Params: Params; Querystring: Query }>,
  reply: FastifyReply,
) {
  const rendition = ladder.rendition(req.params.rendition ?? '');
  if (!rendition) throw new NotFoundError();
  const msn = directive(req.query._HLS_msn);
  const part = directive(req.query._HLS_part);
  if (msn === null || part === null) return refuse(reply, 400, '_HLS_msn and _HLS_part are whole numbers');
  const answer = await rendition.playlist({
    ...(msn === undefined ? {} : { msn }),
    ...(part === undefined ? {} : { part }),
    signal: clientGone(reply),
  });
  if (answer.status !== 200) return refuse(reply, answer.status, answer.reason);
  return reply.headers(PLAYLIST_HEADERS).send(answer.body);
}

/** A blocking-reload directive: undefined when absent, null when not a whole number. */
function directive(value: string | undefined): number | undefined | null {
  if (value === undefined) return undefined;
  return /^(0|[1-9]\d{0,14})$/.test(value) ? Number(value) : null;
}
