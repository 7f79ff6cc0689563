// The stream routes and the live runtime of their node: PATCH suspended: true, DELETE and
// terminate cut a live publisher off through LivePlayback.terminate (a stand-in that records
// the calls, as the runtime's LiveNode would take them), and terminate marks lastTerminatedAt.

import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Principal } from '../../src/accounts/index.ts';
import { transcodeApiErrorHandler } from '../../src/api/errors.ts';
import { plainTextKeyword, withPlainText } from '../../src/api/plain-text.ts';
import { publicBase } from '../../src/api/public-base.ts';
import { streamRoutes } from '../../src/api/stream-routes.ts';
import type { Db } from '../../src/db/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { requestAuth } from '../../src/lib/request-auth.ts';
import { schemaValidatorCompiler } from '../../src/lib/schema-validator.ts';
import { type LivePlayback, StreamStore } from '../../src/live/index.ts';
import { openTestDb } from '../helpers/server.ts';

const PROJECT = '00000000-0000-4000-8000-000000000000';
const ALICE: Principal = { owner: 'alice', projectId: PROJECT, keyId: '00000000-0000-4000-8000-0000000000a1' };

describe('stream routes with a live publisher on this node', () => {
  let db: Db;
  let app: FastifyInstance;
  let url: string;
  let streams: StreamStore;
  const live = new Set<string>();
  const cuts: { streamId: string; reason: string }[] = [];
  const playback: LivePlayback = {
    ladder: () => undefined,
    terminate: (streamId, reason) => {
      if (!live.delete(streamId)) return false;
      cuts.push({ streamId, reason });
      return true;
    },
  };

  before(async () => {
    db = await openTestDb('embedded');
    await db.query('INSERT INTO owners (name, project_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', ['alice', PROJECT]);
    streams = new StreamStore(db);
    app = Fastify();
    // The API's validator and error shapes, as buildApp sets them.
    app.setValidatorCompiler(schemaValidatorCompiler({ keywords: [plainTextKeyword], prepare: withPlainText }));
    app.setErrorHandler(transcodeApiErrorHandler(createLogger({ level: 'silent' })));
    const auth = requestAuth(async () => ALICE);
    await app.register(
      (api) =>
        streamRoutes(api, {
          auth,
          streams,
          live: playback,
          publicBase: publicBase(app, undefined),
          ingestPorts: { rtmp: 1935, srt: 2935 },
        }),
      { prefix: '/api' },
    );
    await app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/api/stream`;
  });
  after(async () => {
    await app.close();
    await db.close();
  });

  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${url}${path}`, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
    });
  const goLive = async (name: string) => {
    const s = await streams.create({ owner: 'alice', projectId: PROJECT, name });
    live.add(s.id);
    return s;
  };

  it('shows both ingest URLs, the SRT one with the key', async () => {
    const res = await call('POST', '', { name: 'urls' });
    assert.equal(res.status, 201);
    const s = (await res.json()) as Record<string, string>;
    assert.equal(s.rtmpIngestUrl, 'rtmp://127.0.0.1:1935/live');
    assert.equal(s.srtIngestUrl, `srt://127.0.0.1:2935?streamid=${s.streamKey}`);
  });

  it("a PATCH's new ladder must keep the rungs the stream's targets name", async () => {
    const low = { name: 'low', width: 320, height: 240, bitrate: 300_000 };
    const made = await call('POST', '', {
      name: 'restreamed',
      profiles: [low],
      multistream: { targets: [{ profile: 'low', id: 'saved-target' }] },
    });
    const { id } = (await made.json()) as { id: string };
    const res = await call('PATCH', `/${id}`, { profiles: [] });
    assert.equal(res.status, 422);
    assert.deepEqual(await res.json(), {
      errors: ['multistream.targets[0].profile: must be "source" (the stream has no profiles)'],
    });
    const both = await call('PATCH', `/${id}`, { profiles: [], multistream: { targets: [] } });
    assert.equal(both.status, 204);
  });

  it('PATCH suspended: true cuts the live publisher off; other changes do not', async () => {
    const s = await goLive('to suspend');
    assert.equal((await call('PATCH', `/${s.id}`, { name: 'renamed' })).status, 204);
    assert.equal(cuts.length, 0);
    assert.equal((await call('PATCH', `/${s.id}`, { suspended: true })).status, 204);
    assert.deepEqual(cuts.pop(), { streamId: s.id, reason: 'the stream was suspended by its owner' });
  });

  it('DELETE cuts the live publisher off', async () => {
    const s = await goLive('to delete');
    assert.equal((await call('DELETE', `/${s.id}`)).status, 204);
    assert.deepEqual(cuts.pop(), { streamId: s.id, reason: 'the stream was deleted by its owner' });
  });

  it('terminate cuts it off (204) and marks lastTerminatedAt; once it is gone, a 409', async () => {
    const s = await goLive('to terminate');
    const res = await call('DELETE', `/${s.id}/terminate`);
    assert.equal(res.status, 204);
    assert.equal(await res.text(), '');
    assert.deepEqual(cuts.pop(), { streamId: s.id, reason: 'the stream was terminated by its owner' });
    const after = (await (await call('GET', `/${s.id}`)).json()) as { lastTerminatedAt: number | null };
    assert.ok(typeof after.lastTerminatedAt === 'number' && after.lastTerminatedAt > s.createdAt.getTime() - 1000);
    const again = await call('DELETE', `/${s.id}/terminate`);
    assert.equal(again.status, 409);
  });
});
