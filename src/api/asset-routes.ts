import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import {
  type AssetSource,
  type AssetStore,
  assetOutputs,
  processingProblems,
  processingSpecOf,
  UPLOAD_TASK_TYPE,
} from '../assets/index.ts';
import { InternalError, NotFoundError, ValidationError } from '../lib/errors.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import {
  AssetPatchBody,
  AssetSchema,
  earlyPlaylistKey,
  type PlaybackInfo,
  PlaybackInfoSchema,
  RequestUploadBody,
  toPlaybackInfo,
  toWireAsset,
  UploadUrlBody,
  withoutQuery,
} from './contract/asset.ts';
import { toWireTask } from './contract/index.ts';
import { createRoute } from './create-route.ts';
import type { IdempotencyKeys } from './idempotency.ts';
import { ListQuery, pageOf } from './paging.ts';
import type { PublicBase } from './public-base.ts';
import { requesterId } from './requester-id.ts';
import { TaskSchema } from './routes.ts';
import { uploadUrls } from './upload-routes.ts';
import { checkInputUrl, checkProfiles, type TranscodeRules } from './validate-transcode.ts';

export interface AssetRoutesDeps {
  auth: RequestAuth<Principal>;
  assets: Pick<AssetStore, 'create' | 'list' | 'get' | 'update' | 'remove' | 'byPlaybackId'>;
  idempotency: IdempotencyKeys;
  publicBase: PublicBase;
  /** MEDIAPLANE_PUBLIC_URL, for the list's `Link` (api/paging.ts). */
  publicUrl?: string | undefined;
  /** The input rules of POST /api/transcode, for POST /api/asset/upload/url. */
  rules: Pick<TranscodeRules, 'allowPrivateUrls' | 'c2paConfigured'>;
  maxQueuedPerOwner: number;
  requesterSalt: string;
  /** The playback info of a live stream's playbackId (stream-routes.ts streamPlayback); undefined: no such stream. */
  streamPlayback?: ((playbackId: string) => Promise<PlaybackInfo | undefined>) | undefined;
}

const AssetId = Type.Object({ id: Type.String({ maxLength: 64 }) });
const Errors = TasksErrorBody;

type AssetOptions = RequestUploadBody & { url?: string };

/** The rules of a create body that JSON Schema cannot say: the URL's, the ladder's, signing's. */
async function checkAssetBody(b: AssetOptions, rules: AssetRoutesDeps['rules']): Promise<void> {
  const problems: string[] = [];
  if (b.url !== undefined) await checkInputUrl('url', b.url, rules, problems);
  const spec = processingSpecOf(b);
  // The ladder must suit the formats the asset is written in (assets/processing.ts assetOutputs).
  checkProfiles(b.profiles ?? undefined, { outputs: assetOutputs(spec), words: 'failure' }, problems);
  problems.push(...processingProblems(spec, { signing: rules.c2paConfigured }));
  if (problems.length > 0) throw new ValidationError(problems);
}

/** The asset routes of spec/API.md section C, and GET /api/playback/{playbackId}. */
export async function assetRoutes(api: FastifyInstance, deps: AssetRoutesDeps): Promise<void> {
  const base = deps.publicBase;

  /** Creates the asset and its `upload` task for a checked body. */
  const create = async (req: FastifyRequest<{ Body: AssetOptions }>, who: Principal, source: AssetSource) => {
    const b = req.body;
    await checkAssetBody(b, deps.rules);
    // The asset keeps its processing spec, and its task carries it (assets/processing.ts).
    const spec = processingSpecOf(b);
    const made = await deps.assets.create({
      owner: who.owner,
      projectId: who.projectId,
      name: b.name,
      source,
      spec,
      playbackPolicy: b.playbackPolicy ?? undefined,
      creatorId: b.creatorId,
      requesterId: requesterId(deps.requesterSalt, req.ip),
      maxQueuedPerOwner: deps.maxQueuedPerOwner,
      key: who,
      task: { type: UPLOAD_TASK_TYPE, params: { ...(b.url === undefined ? {} : { input: { url: b.url } }), ...spec } },
      upload: source.type === 'directUpload',
    });
    req.log.info({ assetId: made.asset.id, taskId: made.task.id, owner: who.owner }, 'asset created');
    return { ...made, asset: toWireAsset(made.asset, base), task: toWireTask(made.task, base) };
  };

  createRoute<RequestUploadBody>(api, {
    url: '/asset/request-upload',
    summary: 'Create an asset and the URLs to upload its file to (a direct PUT, or tus 1.0)',
    body: RequestUploadBody,
    answer: Type.Object({
      url: Type.String({ description: 'PUT the raw file here; no API key (the URL is the capability), expires.' }),
      tusEndpoint: Type.String({ description: 'Or upload with tus 1.0 (resumable) here.' }),
      asset: AssetSchema,
      task: TaskSchema,
    }),
    auth: deps.auth,
    // No Idempotency-Key here: its kept answer would hold the upload URL, a live capability,
    // in the database for 24 h (only the token's hash is stored anywhere else). Livepeer
    // takes none on this route either; a retried request makes a second asset, which
    // expires unused.
    create: async (req, who) => {
      const { asset, task, uploadToken } = await create(req, who, { type: 'directUpload' });
      if (!uploadToken) throw new InternalError('the asset store made no upload token');
      return { ...uploadUrls(base, uploadToken), asset, task };
    },
  });

  createRoute<UploadUrlBody>(api, {
    url: '/asset/upload/url',
    summary: 'Create an asset from a video at a URL (fetched by its upload task)',
    body: UploadUrlBody,
    answer: Type.Object({ asset: AssetSchema, task: TaskSchema }),
    auth: deps.auth,
    idempotency: deps.idempotency,
    create: async (req, who) => {
      // The source shows the URL without its query, where a signature would be; the task
      // keeps it whole to fetch it (tasks/model.ts drops it once the task ends).
      const { asset, task } = await create(req, who, { type: 'url', url: withoutQuery(req.body.url) });
      return { asset, task };
    },
  });

  oneAssetRoutes(api, deps);
  playbackRoute(api, deps);
}

/** The list, and the routes on one asset by its id; another owner's asset is a 404. */
function oneAssetRoutes(api: FastifyInstance, deps: AssetRoutesDeps): void {
  const { auth, assets, publicBase: base } = deps;
  const onRequest = auth.hook;
  api.get<{ Querystring: ListQuery }>(
    '/asset',
    {
      onRequest,
      schema: {
        summary: 'List assets, newest first',
        querystring: ListQuery,
        response: { 200: Type.Array(AssetSchema) },
      },
    },
    async (req, reply) => {
      const read = (page: { limit: number; cursor?: string | undefined }) => assets.list(auth.of(req).owner, page);
      const page = await pageOf(req, reply, { publicUrl: deps.publicUrl, read });
      return page.assets.map((a) => toWireAsset(a, base));
    },
  );
  api.get<{ Params: Static<typeof AssetId> }>(
    '/asset/:id',
    { onRequest, schema: { summary: 'Get an asset', params: AssetId, response: { 200: AssetSchema, 404: Errors } } },
    async (req) => toWireAsset(await assets.get(auth.of(req).owner, req.params.id), base),
  );
  api.patch<{ Params: Static<typeof AssetId>; Body: AssetPatchBody }>(
    '/asset/:id',
    {
      onRequest,
      schema: {
        summary: 'Rename an asset or change its playback policy',
        params: AssetId,
        body: AssetPatchBody,
        response: { 200: AssetSchema, 404: Errors, 422: Errors },
      },
    },
    async (req) => {
      const { name, playbackPolicy } = req.body;
      const patch = {
        ...(name === undefined ? {} : { name }),
        ...(playbackPolicy === undefined ? {} : { playbackPolicy }),
      };
      return toWireAsset(await assets.update(auth.of(req).owner, req.params.id, patch), base);
    },
  );
  api.delete<{ Params: Static<typeof AssetId> }>(
    '/asset/:id',
    {
      onRequest,
      schema: {
        summary: 'Delete an asset and every file of it',
        params: AssetId,
        response: { 204: Type.Null({ description: 'Deleted' }), 404: Errors },
      },
    },
    async (req, reply) => {
      await assets.remove(auth.of(req).owner, req.params.id);
      return reply.status(204).send();
    },
  );
}

const PlaybackId = Type.Object({
  id: Type.String({ maxLength: 64, description: "An asset's or a stream's playbackId" }),
});

/**
 * GET /api/playback/{playbackId}. As on Livepeer, no API key: a player asks it, and the
 * playbackId finds the asset, or else the live stream (type `live`, `meta.live` 0 or 1); the
 * media URLs it lists need a JWT when the playback policy is
 * `jwt` (api/media-access.ts), and are listed without one, as on Livepeer. An asset that is
 * not ready is a 422, as on Livepeer, unless it is processing and plays already (its HLS).
 */
function playbackRoute(api: FastifyInstance, deps: AssetRoutesDeps): void {
  api.get<{ Params: Static<typeof PlaybackId> }>(
    '/playback/:id',
    {
      schema: {
        summary:
          'Playback info of an asset or a live stream by its playbackId: its HLS, MP4 and thumbnail URLs (no API key needed)',
        security: [],
        params: PlaybackId,
        response: { 200: PlaybackInfoSchema, 404: Errors, 422: Errors },
      },
    },
    async (req) => {
      const asset = await deps.assets.byPlaybackId(req.params.id);
      if (!asset) {
        const live = await deps.streamPlayback?.(req.params.id);
        if (live) return live;
      }
      if (!asset || asset.phase === 'deleting' || asset.phase === 'deleted') throw new NotFoundError();
      if (asset.phase !== 'ready' && !earlyPlaylistKey(asset))
        throw new ValidationError(`id: the asset is not ready for playback (it is ${asset.phase})`);
      return toPlaybackInfo(asset, deps.publicBase);
    },
  );
}
