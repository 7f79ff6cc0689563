import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import type { AssetStore } from '../assets/index.ts';
import { NotFoundError } from '../lib/errors.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import type { LiveSessionStore, SessionRecord, StreamStore } from '../live/index.ts';
import {
  recordFilter,
  type SessionListQuery as ListQueryType,
  type SessionRecording,
  SessionListQuery,
  SessionSchema,
  toWireSession,
  type WireSession,
} from './contract/session.ts';
import { ListQuery, pageOf } from './paging.ts';
import type { PublicBase } from './public-base.ts';

// The session routes of spec/API.md section D (Livepeer's, which the `livepeer` SDK's
// session.getAll, session.get and session.getRecorded call): a session is one publish,
// continued by a publisher back within the reconnect window. Another owner's session or
// stream is a 404. A recorded session's status and URLs come from its recording asset, whose
// id is the session's.

export interface SessionRoutesDeps {
  auth: RequestAuth<Principal>;
  sessions: Pick<LiveSessionStore, 'get' | 'list'>;
  streams: Pick<StreamStore, 'get'>;
  /** The recordings' assets (their ids are the sessions'). */
  assets: Pick<AssetStore, 'get' | 'exists'>;
  publicBase: PublicBase;
  publicUrl?: string | undefined;
}

const Id = Type.Object({ id: Type.String({ maxLength: 64 }) });
type Id = Static<typeof Id>;
const Errors = TasksErrorBody;

export async function sessionRoutes(api: FastifyInstance, deps: SessionRoutesDeps): Promise<void> {
  const { auth, sessions } = deps;
  const onRequest = auth.hook;
  const wire = wireWith(deps);

  api.get<{ Querystring: ListQuery }>(
    '/session',
    {
      onRequest,
      schema: {
        summary: 'List live sessions (one per publish), newest first',
        querystring: ListQuery,
        response: { 200: Type.Array(SessionSchema) },
      },
    },
    async (req, reply) => {
      const owner = auth.of(req).owner;
      const read = (page: { limit: number; cursor?: string | undefined }) => sessions.list(owner, page);
      const page = await pageOf(req, reply, { publicUrl: deps.publicUrl, read });
      return Promise.all(page.sessions.map((s) => wire(owner, s)));
    },
  );

  api.get<{ Params: Id }>(
    '/session/:id',
    { onRequest, schema: { summary: 'Get a live session', params: Id, response: { 200: SessionSchema, 404: Errors } } },
    async (req) => {
      const owner = auth.of(req).owner;
      return wire(owner, await sessions.get(owner, req.params.id));
    },
  );

  api.get<{ Params: Id; Querystring: ListQueryType }>(
    '/stream/:id/sessions',
    {
      onRequest,
      schema: {
        summary: "List a stream's sessions, newest first (record=true: the recorded ones)",
        params: Id,
        querystring: SessionListQuery,
        response: { 200: Type.Array(SessionSchema), 404: Errors },
      },
    },
    async (req, reply) => {
      const owner = auth.of(req).owner;
      const stream = await deps.streams.get(owner, req.params.id);
      const record = recordFilter(req.query);
      const read = (page: { limit: number; cursor?: string | undefined }) =>
        sessions.list(owner, { ...page, streamId: stream.id, record });
      const page = await pageOf(req, reply, { publicUrl: deps.publicUrl, read });
      return Promise.all(page.sessions.map((s) => wire(owner, s)));
    },
  );
}

/** A session as the wire shows it, its recording read from its asset. */
function wireWith(deps: SessionRoutesDeps): (owner: string, s: SessionRecord) => Promise<WireSession> {
  const recordingOf = async (owner: string, s: SessionRecord): Promise<SessionRecording> => {
    if (!s.record) return undefined;
    try {
      const asset = await deps.assets.get(owner, s.id);
      return { phase: asset.phase, output: asset.output };
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      // A deleted asset reads as none: it was made, so the recording was deleted.
      return (await deps.assets.exists(s.id)) ? 'deleted' : undefined;
    }
  };
  return async (owner, s) => toWireSession(s, await recordingOf(owner, s), deps.publicBase);
}
