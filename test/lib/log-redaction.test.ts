import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLogger } from '../../src/lib/log.ts';
import { databaseKinds, LogCapture, startTestServer, transcodeBody, type TestServer } from '../helpers/server.ts';

// Issue #15: no log line carries a credential or a query's values, whatever fails. A failed
// task insert logged the database error as it came: PGlite's with the SQL parameters (the
// task's params, S3 secret included), pg's with the failing row (`detail`) and the JSON
// around the bad character (`where`). The logger scrubs every object it writes (lib/log.ts);
// these tests make real database errors and grep every line for the secrets.

// Asked before any suite is declared: a suite already running while this waits lets the
// runner end the file's root early, and with it the helpers' hook that stops PostgreSQL.
const kinds = await databaseKinds();

const SECRET = 'sEcReT/do-not-leak+123';
const ACCESS_KEY = 'AKIATESTKEY';
const SIGNATURE = 'S1GN4TUR3';

function logged(fn: (log: ReturnType<typeof createLogger>) => void): {
  lines: Record<string, unknown>[];
  text: string;
} {
  const out = new LogCapture();
  fn(createLogger({ level: 'debug', destination: out }));
  return { lines: out.lines.map((l) => JSON.parse(l) as Record<string, unknown>), text: out.text };
}

function assertClean(text: string): void {
  for (const line of text.split('\n')) {
    for (const s of [SECRET, ACCESS_KEY, SIGNATURE])
      assert.ok(!line.includes(s), `${s} in a log line: ${line.slice(0, 2000)}`);
  }
}

describe('the logger censors secrets at any depth', () => {
  it('drops the SQL and its values from an error shaped like PGlite’s and pg’s, and keeps what helps', () => {
    const params = JSON.stringify(transcodeBody());
    const pglite = Object.assign(new Error('new row for relation "tasks" violates check constraint'), {
      code: '23514',
      query: 'INSERT INTO tasks ...',
      params: ['id', params],
    });
    const pg = Object.assign(new Error('unsupported Unicode escape sequence'), {
      code: '22P05',
      detail: `Failing row contains (${params})`,
      where: `JSON data, line 1: ..."secretAccessKey":"${SECRET}\\u0000...`,
    });
    const { lines, text } = logged((log) => {
      log.error({ err: pglite }, 'insert failed');
      log.error(pg, 'insert failed');
    });
    assertClean(text);
    assert.equal((lines[0]?.err as { code?: string } | undefined)?.code, '23514');
    assert.equal((lines[0]?.err as { message?: string } | undefined)?.message, pglite.message);
    assert.equal((lines[1]?.err as { type?: string } | undefined)?.type, 'Error');
    assert.match(
      String((lines[1]?.err as { stack?: string } | undefined)?.stack),
      /unsupported Unicode escape sequence\n\s+at /,
    );
  });

  it('censors secret names deep inside objects, causes, aggregates and child bindings', () => {
    const deep = {
      a: { b: { c: { storage: { credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET } } } } },
    };
    const cause = Object.assign(new Error('upload refused'), {
      request: { headers: { Authorization: `AWS4-HMAC-SHA256 Credential=${ACCESS_KEY}/x, Signature=${SIGNATURE}` } },
    });
    const { text } = logged((log) => {
      log.info(deep, 'deep');
      log.warn({ err: new Error('task failed', { cause }) }, 'cause');
      log.warn({ err: new AggregateError([cause], 'several') }, 'aggregate');
      log
        .child({ sharedSecret: SECRET, apiKey: SECRET })
        .info({ proof: SECRET, password: SECRET, token: SECRET, orchestratorSecret: SECRET }, 'names');
      log.info({ task: { params: transcodeBody() } }, 'a row');
    });
    assertClean(text);
    assert.match(text, /upload refused/, 'the cause is still logged');
  });

  it('cuts URL query strings and quoted secrets out of text, messages included', () => {
    const signed = `https://bucket.example.com/v.mp4?X-Amz-Credential=${ACCESS_KEY}&X-Amz-Signature=${SIGNATURE}`;
    const { text, lines } = logged((log) => {
      log.info({ input: signed, url: new URL(signed) }, 'fetching');
      log.info(`fetching ${signed}`);
      log.info('fetching %s', signed);
      log.warn({ err: new Error(`GET ${signed} failed`) }, 'failed');
      log.warn({ err: new Error(`bad row {"secretAccessKey": "${SECRET}", "accessKeyId":"${ACCESS_KEY}"}`) }, 'row');
      log.info(`sent Authorization: Bearer ${SECRET}`);
    });
    assertClean(text);
    assert.equal(lines[0]?.input, 'https://bucket.example.com/v.mp4?***', 'the URL without its query stays readable');
  });

  it('censors a capability parameter whose name is percent-encoded, as the query parser decodes it', () => {
    // Fastify decodes query names: `?%74oken=` is an upload URL's `token`, `?%6Awt=` a playback `jwt`.
    const urls = [
      `/api/asset/upload/direct?%74oken=${SECRET}`,
      `/media/asset/x/index.m3u8?a=1&%6Awt=${SIGNATURE}`,
      `/media/asset/x/index.m3u8?%4A%57%54=${SIGNATURE}`,
      `/api/asset/upload/tus/id?to%6Ben=${ACCESS_KEY}&b=2`,
      `/x?next=/y?%74oken=${SECRET}`,
    ];
    const { text, lines } = logged((log) => {
      for (const url of urls) {
        log.info({ req: { method: 'PUT', url } }, 'incoming request');
        log.info(`PUT ${url} failed`);
      }
      log.info({ url: `/x?name%20x=${'kept'}&b=%74oken` }, 'a name that is no secret');
    });
    assertClean(text);
    assert.equal((lines[0]?.req as { url?: string } | undefined)?.url, '/api/asset/upload/direct?%74oken=***');
    assert.equal(lines.at(-1)?.url, '/x?name%20x=kept&b=%74oken', 'other parameters stay readable');
  });

  it('writes a circular object without throwing', () => {
    const loop: Record<string, unknown> = { name: 'loop', secret: SECRET };
    loop.self = loop;
    const { text } = logged((log) => log.info({ loop }, 'loop'));
    assertClean(text);
    assert.match(text, /\[Circular\]/);
  });
});

for (const { kind, skip } of kinds) {
  describe(`a database write that fails logs no secret (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let key: string;

    before(async () => {
      server = await startTestServer({ database: kind, roles: { api: true, worker: false } });
      key = await server.key('alice');
      // A constraint the request passes validation for: the insert fails inside the database,
      // whose error then quotes the row (pg's `detail`) or carries the parameters (PGlite).
      await server.running.core.db.query(
        `ALTER TABLE tasks ADD CONSTRAINT refuse_for_test CHECK (params->>'creatorId' IS DISTINCT FROM 'refuse-me')`,
      );
    });
    after(() => server?.stop());

    it('a failed insert is a bare 500, logged with its code and without the secret', async () => {
      // pg quotes the failing row, each value cut at 64 bytes: a short signed URL fits.
      const input = { url: `http://127.1/v?X-Amz-Signature=${SIGNATURE}` };
      const res = await server.call('POST', '/api/transcode', {
        key,
        body: transcodeBody({ creatorId: 'refuse-me', input }),
      });
      assert.equal(res.status, 500);
      assert.deepEqual(res.body, { errors: ['internal server error'] });
      const errors = server.logs.lines.filter((l) => l.includes('"level":50'));
      assert.equal(errors.length, 1, server.logs.text);
      assert.match(errors[0] ?? '', /"code":"23514"/, 'the log says what failed');
      assertClean(server.logs.text);
      assert.ok(!server.logs.text.includes(key), 'the API key leaked');
    });

    it('a request whose capability parameter has an encoded name logs no value of it', async () => {
      const res = await fetch(`${server.url}/api/asset/upload/direct?%74oken=${SECRET}`, { method: 'PUT', body: 'x' });
      assert.equal(res.status, 404);
      assert.match(server.logs.text, /upload\/direct\?%74oken=\*\*\*/, 'the request line is written, scrubbed');
      assertClean(server.logs.text);
    });

    it('an insert that bypasses validation with a NUL after the secret logs no secret', async () => {
      const params = transcodeBody({
        storage: {
          type: 's3',
          endpoint: 'http://127.0.0.1:9000',
          bucket: 'out',
          credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: `${SECRET}\u0000` },
        },
      });
      const err = await server.running.core.tasks
        .create({
          owner: 'alice',
          projectId: '00000000-0000-4000-8000-000000000000',
          type: 'transcode-file',
          params,
          requesterId: null,
          maxQueuedPerOwner: 100,
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      assert.ok(err instanceof Error, 'the database refused the NUL');
      server.running.core.log.error({ err }, 'task insert failed');
      server.running.core.log.error(err, 'task insert failed');
      const lines = server.logs.lines.filter((l) => l.includes('task insert failed'));
      assert.equal(lines.length, 2);
      assert.match(lines[0] ?? '', /"code":"22P05"/);
      assertClean(server.logs.text);
    });
  });
}
