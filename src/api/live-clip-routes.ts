import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import { type AssetStore, CLIP_TASK_TYPE, LIVE_CLIP_WAIT_MS, type LiveClipRange } from '../assets/index.ts';
import { NotFoundError, ValidationError } from '../lib/errors.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import type { StreamRecord, StreamStore } from '../live/index.ts';
import { AssetSchema, toWireAsset } from './contract/asset.ts';
import { type ClipBody, liveClipRangeProblems } from './contract/clip.ts';
import { toWireTask } from './contract/index.ts';
import { ListQuery, pageOf } from './paging.ts';
import type { PublicBase } from './public-base.ts';
import { requesterId } from './requester-id.ts';

// Clips of live streams (spec/API.md section D): POST /api/clip with a stream's playbackId
// (clip-routes.ts hands it here) makes an asset from the range of the stream's session that the
// live archive keeps, through a `clip` task (assets/live-clip.ts); GET /api/stream/{id}/clips
// and GET /api/session/{id}/clips list them.

/** What the live clip routes read of the live domain. */
export interface LiveClipSources {
  streams: Pick<StreamStore, 'byPlaybackId' | 'get'>;
  /** The owner's session (live/ LiveSessionStore); another owner's, or none: a NotFoundError. */
  sessions: { get(owner: string, id: string): Promise<{ streamId: string }> };
  /** MEDIAPLANE_LIVE_CLIP_SECS: how far back a live clip may reach, and its longest length. */
  clipSecs: number;
}

/** What making a live clip uses besides the live domain: the asset store and the create routes' settings. */
export interface LiveClipDeps {
  live: LiveClipSources;
  assets: Pick<AssetStore, 'create'>;
  publicBase: PublicBase;
  maxQueuedPerOwner: number;
  requesterSalt: string;
}

/**
 * POST /api/clip of the caller's live stream: the range (Unix ms, the end now when absent)
 * checked against the clip window, the session (the stream's current or last one, or the one
 * asked, which must be the stream's), then the asset and its `clip` task. The asset is made by
 * the system for the stream's owner, so no key's limits refuse it; it queues like any task.
 */
export async function createLiveClip(
  d: LiveClipDeps,
  req: FastifyRequest<{ Body: ClipBody }>,
  o: { who: Principal; stream: StreamRecord },
): Promise<unknown> {
  const { who, stream } = o;
  const b = req.body;
  const nowMs = Date.now();
  // Whole milliseconds: the archive dates its parts so, and a player's clock gives fractions.
  const range = { startTime: Math.round(b.startTime), endTime: Math.round(b.endTime ?? nowMs) };
  const problems = liveClipRangeProblems(range, { nowMs, clipSecs: d.live.clipSecs, waitMs: LIVE_CLIP_WAIT_MS });
  if (problems.length > 0) throw new ValidationError(problems);
  const sessionId = await sessionToClip(d.live, { owner: who.owner, stream, asked: b.sessionId });
  const live: LiveClipRange = { sessionId, playbackId: stream.playbackId, ...range };
  const made = await d.assets.create({
    owner: who.owner,
    projectId: who.projectId,
    name: b.name ?? `${stream.name.slice(0, 500)} (clip)`,
    // Livepeer's source of a live clip: the stream (sourceId, playbackId) and the session.
    source: { type: 'clip', sourceId: stream.id, playbackId: stream.playbackId, sessionId },
    spec: {},
    // A clip of a private stream stays private: it plays under the same policy.
    playbackPolicy: stream.playbackPolicy,
    requesterId: requesterId(d.requesterSalt, req.ip),
    maxQueuedPerOwner: d.maxQueuedPerOwner,
    task: { type: CLIP_TASK_TYPE, params: { live } },
  });
  req.log.info(
    { assetId: made.asset.id, taskId: made.task.id, stream: stream.id, session: sessionId, owner: who.owner },
    'live clip created',
  );
  return { asset: toWireAsset(made.asset, d.publicBase), task: toWireTask(made.task, d.publicBase) };
}

/** The session a live clip reads: the one asked when it is the stream's, else the stream's current or last. */
async function sessionToClip(
  live: LiveClipSources,
  o: { owner: string; stream: StreamRecord; asked?: string | undefined },
): Promise<string> {
  const { stream, asked } = o;
  if (asked === undefined) {
    if (!stream.sessionId)
      throw new ValidationError('playbackId: the stream has never been live, so nothing of it can be clipped');
    return stream.sessionId;
  }
  if (asked === stream.sessionId) return asked;
  const session = await live.sessions.get(o.owner, asked).catch((err: unknown) => {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  });
  if (session?.streamId !== stream.id) throw new ValidationError("sessionId: not one of this stream's sessions");
  return asked;
}

const Id = Type.Object({ id: Type.String({ maxLength: 64 }) });

export interface LiveClipListDeps {
  auth: RequestAuth<Principal>;
  live: LiveClipSources;
  assets: Pick<AssetStore, 'list'>;
  publicBase: PublicBase;
  /** MEDIAPLANE_PUBLIC_URL, for the list's `Link` (api/paging.ts). */
  publicUrl?: string | undefined;
}

/** GET /api/stream/{id}/clips and GET /api/session/{id}/clips: newest first, paged; another owner's stream or session is a 404. */
export async function liveClipRoutes(api: FastifyInstance, deps: LiveClipListDeps): Promise<void> {
  const { auth, live, assets } = deps;
  const lists = [
    {
      url: '/stream/:id/clips',
      summary: "List the clips of a live stream's sessions, newest first",
      of: async (owner: string, id: string) => ({ sourceId: (await live.streams.get(owner, id)).id }),
    },
    {
      url: '/session/:id/clips',
      summary: 'List the clips of a live session, newest first',
      of: async (owner: string, id: string) => {
        await live.sessions.get(owner, id);
        return { sessionId: id };
      },
    },
  ];
  for (const list of lists)
    api.get<{ Params: Static<typeof Id>; Querystring: ListQuery }>(
      list.url,
      {
        onRequest: auth.hook,
        schema: {
          summary: list.summary,
          params: Id,
          querystring: ListQuery,
          response: { 200: Type.Array(AssetSchema), 404: TasksErrorBody },
        },
      },
      async (req, reply) => {
        const { owner } = auth.of(req);
        const clipsOf = await list.of(owner, req.params.id);
        const read = (page: { limit: number; cursor?: string | undefined }) => assets.list(owner, { ...page, clipsOf });
        const page = await pageOf(req, reply, { publicUrl: deps.publicUrl, read });
        return page.assets.map((a) => toWireAsset(a, deps.publicBase));
      },
    );
}
