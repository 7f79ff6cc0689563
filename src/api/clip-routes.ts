import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import {
  type AssetRow,
  type AssetSpec,
  type AssetStore,
  assetSourceKey,
  CLIP_TASK_TYPE,
  processingSpecOf,
} from '../assets/index.ts';
import { NotFoundError, ValidationError } from '../lib/errors.ts';
import type { StreamRecord } from '../live/index.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { AssetSchema, toWireAsset } from './contract/asset.ts';
import { ClipBody, clipRangeProblems } from './contract/clip.ts';
import { toWireTask } from './contract/index.ts';
import { createRoute } from './create-route.ts';
import type { IdempotencyKeys } from './idempotency.ts';
import { createLiveClip, type LiveClipSources } from './live-clip-routes.ts';
import type { PublicBase } from './public-base.ts';
import { requesterId } from './requester-id.ts';
import { TaskSchema } from './routes.ts';

export interface ClipRoutesDeps {
  auth: RequestAuth<Principal>;
  assets: Pick<AssetStore, 'byPlaybackId' | 'create'>;
  idempotency: IdempotencyKeys;
  publicBase: PublicBase;
  maxQueuedPerOwner: number;
  requesterSalt: string;
  /** Live streams, whose playbackIds clip their sessions (live-clip-routes.ts); absent: assets only. */
  live?: LiveClipSources | undefined;
}

/**
 * What the playbackId names of the caller's: a ready asset, or a live stream. Another owner's
 * is a 404 like an unknown one (as every asset and stream route answers), so a playbackId,
 * which anyone may hold to play it, tells nothing of who owns it.
 */
async function clipSource(
  deps: ClipRoutesDeps,
  owner: string,
  playbackId: string,
): Promise<{ asset: AssetRow & { output: object } } | { stream: StreamRecord; live: LiveClipSources }> {
  const asset = await deps.assets.byPlaybackId(playbackId);
  if (asset?.owner !== owner) {
    const stream = await deps.live?.streams.byPlaybackId(playbackId);
    if (deps.live && stream?.owner === owner) return { stream, live: deps.live };
    throw new NotFoundError('playbackId: no asset or stream of yours has this playbackId');
  }
  if (asset.phase !== 'ready' || !asset.output)
    throw new ValidationError(`playbackId: the asset is not ready to clip (it is ${asset.phase})`);
  return { asset: asset as AssetRow & { output: object } };
}

/** The processing the clip inherits from its source: its ladder, segment length and MP4s (not C2PA signing, which is asked per asset). */
function inheritedSpec(spec: AssetSpec): AssetSpec {
  const { c2pa: _asked, ...inherited } = processingSpecOf(spec);
  return inherited;
}

/**
 * POST /api/clip (spec/API.md section C, issue #28): a new asset cut from a range of one of
 * the caller's ready assets, made by a `clip` task (assets/clip.ts). The range is checked here
 * against the source's duration, so a range outside it is a 422 before any task exists. A
 * live stream's playbackId clips its session instead (live-clip-routes.ts, section D).
 */
export async function clipRoutes(api: FastifyInstance, deps: ClipRoutesDeps): Promise<void> {
  createRoute<ClipBody>(api, {
    url: '/clip',
    summary: 'Clip a range of an asset into a new asset (frame-accurate at both ends)',
    body: ClipBody,
    answer: Type.Object({ asset: AssetSchema, task: TaskSchema }),
    auth: deps.auth,
    idempotency: deps.idempotency,
    create: async (req, who) => {
      const b = req.body;
      const found = await clipSource(deps, who.owner, b.playbackId);
      if ('stream' in found) return createLiveClip({ ...deps, live: found.live }, req, { who, stream: found.stream });
      const source = found.asset;
      const { videoSpec } = source.output as NonNullable<AssetRow['output']>;
      const fps = videoSpec.tracks.find((t) => t.type === 'video')?.fps;
      const duration = videoSpec.duration ?? 0;
      // Without an end, the clip runs to the asset's end (Livepeer's SDK leaves endTime optional).
      const range = { startTime: b.startTime, endTime: b.endTime ?? Math.round(duration * 1000) };
      const problems = clipRangeProblems(range, { duration, ...(fps ? { fps } : {}) });
      if (problems.length > 0) throw new ValidationError(problems);
      const spec = inheritedSpec(source.spec);
      const made = await deps.assets.create({
        owner: who.owner,
        projectId: who.projectId,
        name: b.name ?? `${source.name.slice(0, 500)} (clip)`,
        source: { type: 'clip', sourceId: source.id, playbackId: source.playback_id, assetId: source.id },
        spec,
        // A clip of a private asset stays private: it plays under the same policy.
        playbackPolicy: source.playback_policy ?? undefined,
        requesterId: requesterId(deps.requesterSalt, req.ip),
        maxQueuedPerOwner: deps.maxQueuedPerOwner,
        key: who,
        task: {
          type: CLIP_TASK_TYPE,
          params: {
            source: { assetId: source.id, playbackId: source.playback_id, key: assetSourceKey(source.playback_id) },
            ...range,
            ...(b.sessionId === undefined ? {} : { sessionId: b.sessionId }),
            ...spec,
          },
        },
      });
      req.log.info({ assetId: made.asset.id, taskId: made.task.id, from: source.id, owner: who.owner }, 'clip created');
      return { asset: toWireAsset(made.asset, deps.publicBase), task: toWireTask(made.task, deps.publicBase) };
    },
  });
}
