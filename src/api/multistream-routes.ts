import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import { NotFoundError, ValidationError } from '../lib/errors.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import type { MultistreamTargetStore, StreamStore } from '../live/index.ts';
import {
  MultistreamTargetCreateBody,
  MultistreamTargetPatchBody,
  MultistreamTargetSchema,
  toWireTarget,
} from './contract/multistream.ts';
import { StreamTargetBody } from './contract/stream.ts';
import { ListQuery, pageOf } from './paging.ts';
import { keptTargets, namedSpec, targetProblems, targetUrlProblems } from './stream-targets.ts';
import type { TranscodeRules } from './validate-transcode.ts';

// Livepeer's restream target routes (spec/API.md section D), with the status codes the
// `livepeer` SDK 3.5 insists on: 201 for the create, 204 and no body for PATCH, DELETE,
// create-multistream-target and the removal from a stream. A target's url is taken in, checked
// (scheme, address guard) and never given back nor logged: the messages name the field, not
// the url. Another owner's target or stream is a 404, as if it did not exist.

export type TargetStoreLike = Pick<MultistreamTargetStore, 'create' | 'list' | 'get' | 'update' | 'remove' | 'owned'>;

export interface MultistreamRoutesDeps {
  auth: RequestAuth<Principal>;
  targets: TargetStoreLike;
  streams: Pick<StreamStore, 'get' | 'update'>;
  rules: Pick<TranscodeRules, 'allowPrivateUrls'>;
  /** MEDIAPLANE_PUBLIC_URL, for the list's `Link` (api/paging.ts). */
  publicUrl?: string | undefined;
}

const TargetId = Type.Object({ id: Type.String({ maxLength: 64 }) });
const StreamTargetIds = Type.Object({ id: Type.String({ maxLength: 64 }), targetId: Type.String({ maxLength: 64 }) });
const Errors = TasksErrorBody;
const NoContent = { 204: Type.Null({ description: 'Done' }) };

/** The routes of section D on restream targets. */
export async function multistreamRoutes(api: FastifyInstance, deps: MultistreamRoutesDeps): Promise<void> {
  savedTargetRoutes(api, deps);
  oneTargetRoutes(api, deps);
  streamTargetRoutes(api, deps);
}

/** POST|GET /multistream/target. */
function savedTargetRoutes(api: FastifyInstance, deps: MultistreamRoutesDeps): void {
  const { auth, targets, rules } = deps;
  const onRequest = auth.hook;
  api.post<{ Body: MultistreamTargetCreateBody }>(
    '/multistream/target',
    {
      onRequest,
      schema: {
        summary: 'Save a restream target (RTMP, RTMPS or SRT); its url is never shown back',
        body: MultistreamTargetCreateBody,
        response: { 201: MultistreamTargetSchema, 422: Errors },
      },
    },
    async (req, reply) => {
      const who = auth.of(req);
      const problems = await targetUrlProblems('url', req.body.url, rules);
      if (problems.length > 0) throw new ValidationError(problems);
      const { name, url, disabled } = req.body;
      const made = await targets.create({
        owner: who.owner,
        projectId: who.projectId,
        disabled,
        ...namedSpec({ name, url }),
      });
      req.log.info({ targetId: made.id, owner: who.owner }, 'multistream target saved');
      return reply.code(201).send(toWireTarget(made));
    },
  );

  api.get<{ Querystring: Static<typeof ListQuery> }>(
    '/multistream/target',
    {
      onRequest,
      schema: {
        summary: 'List restream targets, newest first',
        querystring: ListQuery,
        response: { 200: Type.Array(MultistreamTargetSchema) },
      },
    },
    async (req, reply) => {
      const read = (page: { limit: number; cursor?: string | undefined }) => targets.list(auth.of(req).owner, page);
      return (await pageOf(req, reply, { publicUrl: deps.publicUrl, read })).targets.map(toWireTarget);
    },
  );
}

/** GET|PATCH|DELETE /multistream/target/{id}. */
function oneTargetRoutes(api: FastifyInstance, deps: MultistreamRoutesDeps): void {
  const { auth, targets, rules } = deps;
  const onRequest = auth.hook;
  api.get<{ Params: Static<typeof TargetId> }>(
    '/multistream/target/:id',
    {
      onRequest,
      schema: {
        summary: 'Get a restream target',
        params: TargetId,
        response: { 200: MultistreamTargetSchema, 404: Errors },
      },
    },
    async (req) => toWireTarget(await targets.get(auth.of(req).owner, req.params.id)),
  );

  api.patch<{ Params: Static<typeof TargetId>; Body: MultistreamTargetPatchBody }>(
    '/multistream/target/:id',
    {
      onRequest,
      schema: {
        summary: 'Change a restream target (a session already pushing to it keeps the url it had)',
        params: TargetId,
        body: MultistreamTargetPatchBody,
        response: { ...NoContent, 404: Errors, 422: Errors },
      },
    },
    async (req, reply) => {
      const owner = auth.of(req).owner;
      await targets.get(owner, req.params.id);
      if (req.body.url !== undefined) {
        const problems = await targetUrlProblems('url', req.body.url, rules);
        if (problems.length > 0) throw new ValidationError(problems);
      }
      await targets.update(owner, req.params.id, req.body);
      return reply.code(204).send();
    },
  );

  api.delete<{ Params: Static<typeof TargetId> }>(
    '/multistream/target/:id',
    {
      onRequest,
      schema: {
        summary: 'Delete a restream target (streams that name it push to it no more)',
        params: TargetId,
        response: { ...NoContent, 404: Errors },
      },
    },
    async (req, reply) => {
      await targets.remove(auth.of(req).owner, req.params.id);
      return reply.code(204).send();
    },
  );
}

/** POST /stream/{id}/create-multistream-target, DELETE /stream/{id}/multistream/{targetId}. */
function streamTargetRoutes(api: FastifyInstance, deps: MultistreamRoutesDeps): void {
  const { auth, streams } = deps;
  const onRequest = auth.hook;
  api.post<{ Params: Static<typeof TargetId>; Body: StreamTargetBody }>(
    '/stream/:id/create-multistream-target',
    {
      onRequest,
      schema: {
        summary:
          "Add a restream target to a stream (a saved one by id, or a spec saved as one); from the stream's next session on",
        params: TargetId,
        body: StreamTargetBody,
        response: { ...NoContent, 404: Errors, 422: Errors },
      },
    },
    async (req, reply) => {
      const who = auth.of(req);
      const stream = await streams.get(who.owner, req.params.id);
      const problems = targetProblems([req.body], stream.profiles, () => 'body');
      if (problems.length > 0) throw new ValidationError(problems);
      const [added] = await keptTargets([req.body], {
        owner: who.owner,
        projectId: who.projectId,
        targets: deps.targets,
        rules: deps.rules,
        field: () => 'body',
        unknownIdIsNotFound: true,
      });
      if (added === undefined) throw new ValidationError('a target: must have an id or a spec');
      const others = stream.multistream.targets.filter((t) => t.id !== added.id);
      await streams.update(who.owner, stream.id, { multistream: { targets: [...others, added] } });
      return reply.code(204).send();
    },
  );

  api.delete<{ Params: Static<typeof StreamTargetIds> }>(
    '/stream/:id/multistream/:targetId',
    {
      onRequest,
      schema: {
        summary: 'Remove a restream target from a stream (the saved target stays)',
        params: StreamTargetIds,
        response: { ...NoContent, 404: Errors },
      },
    },
    async (req, reply) => {
      const owner = auth.of(req).owner;
      const stream = await streams.get(owner, req.params.id);
      const kept = stream.multistream.targets.filter((t) => t.id !== req.params.targetId);
      if (kept.length === stream.multistream.targets.length)
        throw new NotFoundError('the stream has no multistream target with this id');
      await streams.update(owner, stream.id, { multistream: { targets: kept } });
      return reply.code(204).send();
    },
  );
}
