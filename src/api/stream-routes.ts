import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import { ConflictError, ValidationError } from '../lib/errors.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import {
  type LivePlayback,
  type RemoteCut,
  profileProblems,
  type StreamPatch,
  type StreamRecord,
  type StreamStore,
} from '../live/index.ts';
import {
  type IngestAddress,
  profilesOf,
  StreamCreateBody,
  StreamPatchBody,
  StreamSchema,
  toLivePlaybackInfo,
  toWireStream,
} from './contract/stream.ts';
import type { PlaybackInfo } from './contract/asset.ts';
import { ListQuery, pageOf } from './paging.ts';
import type { PublicBase } from './public-base.ts';
import { keptTargets, type TargetSaver, targetProblems } from './stream-targets.ts';
import type { TranscodeRules } from './validate-transcode.ts';

// The stream routes of spec/API.md section D (Livepeer's, with the status codes its SDK 3.5
// insists on: 201 for the create, 204 and no body for PATCH, DELETE and terminate). The
// stream key is in the answers to its owner and nowhere else: no log line here names it,
// and the create takes no Idempotency-Key, whose kept answer would hold the key for a day.

export interface StreamRoutesDeps {
  auth: RequestAuth<Principal>;
  streams: Pick<StreamStore, 'create' | 'list' | 'get' | 'update' | 'remove' | 'terminated'>;
  /** The live runtime of this node: cuts a publisher off (absent: nothing is live here). */
  live?: LivePlayback | undefined;
  /** Several nodes: cuts a publisher off on the node holding its stream. */
  remote?: RemoteCut | undefined;
  publicBase: PublicBase;
  /** MEDIAPLANE_PUBLIC_URL, for the list's `Link` (api/paging.ts). */
  publicUrl?: string | undefined;
  /** MEDIAPLANE_RTMP_PORT and MEDIAPLANE_SRT_PORT (0: that ingest is off). */
  ingestPorts: { rtmp: number; srt: number };
  /** Saved restream targets: a body's inline specs are saved there (their urls checked by `rules`) and kept by id. */
  targets?: { saver: TargetSaver; rules: Pick<TranscodeRules, 'allowPrivateUrls'> } | undefined;
}

const StreamId = Type.Object({ id: Type.String({ maxLength: 64 }) });
const StreamListQuery = Type.Object(
  {
    ...ListQuery.properties,
    streamsonly: Type.Optional(
      Type.String({
        maxLength: 8,
        description: "Livepeer's filter of sessions out of the list; every entry here is a stream.",
      }),
    ),
  },
  { additionalProperties: false },
);
type StreamListQuery = Static<typeof StreamListQuery>;
const Errors = TasksErrorBody;
const NoContent = { 204: Type.Null({ description: 'Done' }) };

/** The rules of a body that JSON Schema cannot say, checked against the ladder the stream will have. */
function checkStreamBody(b: StreamPatch, current?: StreamRecord): void {
  const profiles = b.profiles === undefined ? (current?.profiles ?? null) : b.profiles;
  // A new ladder must still have the rungs the stream's kept targets name.
  const targets = b.multistream?.targets ?? (b.profiles === undefined ? [] : (current?.multistream.targets ?? []));
  const problems = [
    ...profileProblems(b.profiles ?? []),
    ...profileProblems(b.recordingSpec?.profiles ?? [], 'recordingSpec.profiles'),
    ...targetProblems(targets, profiles),
  ];
  if (problems.length > 0) throw new ValidationError(problems);
}

/** The body's targets as the stream keeps them: inline specs saved as targets, ids the owner's (stream-targets.ts). */
async function keepTargets(
  deps: StreamRoutesDeps,
  who: { owner: string; projectId: string },
  patch: StreamPatch,
): Promise<void> {
  const given = patch.multistream?.targets;
  if (given === undefined || !deps.targets) return;
  const { saver, rules } = deps.targets;
  const field = (i: number): string => `multistream.targets[${i}]`;
  patch.multistream = { targets: await keptTargets(given, { ...who, targets: saver, rules, field }) };
}

/** The domain's patch of a create or PATCH body: the profiles with fps filled in. */
function patchOf(b: StreamPatchBody | StreamCreateBody): StreamPatch {
  const { profiles, recordingSpec, ...rest } = b;
  const patch: StreamPatch = { ...rest };
  if (profiles !== undefined) patch.profiles = profiles === null ? null : profilesOf(profiles);
  if (recordingSpec !== undefined)
    patch.recordingSpec = recordingSpec.profiles ? { profiles: profilesOf(recordingSpec.profiles) } : {};
  return patch;
}

/** The routes of section D on streams; another owner's stream is a 404. */
export async function streamRoutes(api: FastifyInstance, deps: StreamRoutesDeps): Promise<void> {
  const edge: Edge = {
    wire: (s) => toWireStream(s, ingestAddress(deps)),
    cut: async (s, reason) =>
      deps.live?.terminate(s.id, reason) ||
      ((await deps.remote?.terminate({ streamId: s.id, playbackId: s.playbackId, reason })) ?? false),
  };
  readRoutes(api, deps, edge);
  changeRoutes(api, deps, edge);
}

/** What the routes share: the wire shape with this node's ingest URLs, and the cut of a live publisher. */
interface Edge {
  wire(s: StreamRecord): ReturnType<typeof toWireStream>;
  /** Cuts the publisher of `s` off when it is live on this node or (several nodes) another; whether it was. */
  cut(s: StreamRecord, reason: string): Promise<boolean>;
}

/** Create, list, get. */
function readRoutes(api: FastifyInstance, deps: StreamRoutesDeps, { wire }: Edge): void {
  const { auth, streams } = deps;
  const onRequest = auth.hook;
  api.post<{ Body: StreamCreateBody }>(
    '/stream',
    {
      onRequest,
      schema: {
        summary: 'Create a live stream: its key (for RTMP or SRT publishers) and its playbackId',
        body: StreamCreateBody,
        response: { 201: StreamSchema, 422: Errors },
      },
    },
    async (req, reply) => {
      const who = auth.of(req);
      const patch = patchOf(req.body);
      checkStreamBody(patch);
      await keepTargets(deps, who, patch);
      const { name } = req.body;
      const made = await streams.create({
        ...patch,
        name,
        owner: who.owner,
        projectId: who.projectId,
        keyId: who.keyId,
      });
      req.log.info({ streamId: made.id, owner: who.owner }, 'stream created');
      return reply.code(201).send(wire(made));
    },
  );

  api.get<{ Querystring: StreamListQuery }>(
    '/stream',
    {
      onRequest,
      schema: {
        summary: 'List streams, newest first',
        querystring: StreamListQuery,
        response: { 200: Type.Array(StreamSchema) },
      },
    },
    async (req, reply) => {
      const read = (page: { limit: number; cursor?: string | undefined }) => streams.list(auth.of(req).owner, page);
      const page = await pageOf(req, reply, { publicUrl: deps.publicUrl, read });
      return page.streams.map(wire);
    },
  );

  api.get<{ Params: Static<typeof StreamId> }>(
    '/stream/:id',
    { onRequest, schema: { summary: 'Get a stream', params: StreamId, response: { 200: StreamSchema, 404: Errors } } },
    async (req) => wire(await streams.get(auth.of(req).owner, req.params.id)),
  );
}

/** PATCH, DELETE, terminate: 204s with no body, as the SDK insists. */
function changeRoutes(api: FastifyInstance, deps: StreamRoutesDeps, { cut }: Edge): void {
  const { auth, streams } = deps;
  const onRequest = auth.hook;

  api.patch<{ Params: Static<typeof StreamId>; Body: StreamPatchBody }>(
    '/stream/:id',
    {
      onRequest,
      schema: {
        summary: 'Change a stream (suspended: true also cuts its publisher off)',
        params: StreamId,
        body: StreamPatchBody,
        response: { ...NoContent, 404: Errors, 422: Errors },
      },
    },
    async (req, reply) => {
      const who = auth.of(req);
      const owner = who.owner;
      const current = await streams.get(owner, req.params.id);
      const patch = patchOf(req.body);
      checkStreamBody(patch, current);
      await keepTargets(deps, who, patch);
      const changed = await streams.update(owner, current.id, patch);
      if (patch.suspended === true && (await cut(changed, 'the stream was suspended by its owner')))
        req.log.info({ streamId: changed.id }, 'suspended stream: its publisher was cut off');
      return reply.code(204).send();
    },
  );

  api.delete<{ Params: Static<typeof StreamId> }>(
    '/stream/:id',
    {
      onRequest,
      schema: {
        summary: 'Delete a stream (its publisher is cut off)',
        params: StreamId,
        response: { ...NoContent, 404: Errors },
      },
    },
    async (req, reply) => {
      const removed = await streams.remove(auth.of(req).owner, req.params.id);
      await cut(removed, 'the stream was deleted by its owner');
      return reply.code(204).send();
    },
  );

  api.delete<{ Params: Static<typeof StreamId> }>(
    '/stream/:id/terminate',
    {
      onRequest,
      schema: {
        summary: 'Cut the live publisher of a stream off (it may publish again)',
        params: StreamId,
        response: { ...NoContent, 404: Errors, 409: Errors },
      },
    },
    async (req, reply) => {
      const owner = auth.of(req).owner;
      const s = await streams.get(owner, req.params.id);
      if (!(await cut(s, 'the stream was terminated by its owner')))
        throw new ConflictError(
          s.isActive
            ? "the stream's publisher is on another node of this service: terminate it there"
            : 'the stream is not live: there is no publisher to cut off',
        );
      await streams.terminated(owner, s.id);
      return reply.code(204).send();
    },
  );
}

/** The host of the ingest URLs: MEDIAPLANE_PUBLIC_URL's, else the address the API listens on. */
function ingestAddress(deps: StreamRoutesDeps): IngestAddress | undefined {
  const base = deps.publicBase();
  if (base === '') return undefined;
  const host = new URL(base).hostname.replace(/^\[(.*)\]$/, '$1');
  return { host, rtmpPort: deps.ingestPorts.rtmp, srtPort: deps.ingestPorts.srt };
}

/** The playback info of the stream a playbackId names, for GET /api/playback/{playbackId}; undefined: none. */
export function streamPlayback(
  streams: Pick<StreamStore, 'byPlaybackId'>,
  base: PublicBase,
): (playbackId: string) => Promise<PlaybackInfo | undefined> {
  return async (playbackId) => {
    const s = await streams.byPlaybackId(playbackId);
    return s && toLivePlaybackInfo(s, base);
  };
}
