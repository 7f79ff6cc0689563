import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { serveFile, startHttp, status, type Route, type TestHttp } from '../helpers/http-input.ts';
import { makeClip } from '../helpers/media.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import { databaseKinds, startTestServer, waitFor, type TestServer } from '../helpers/server.ts';

// Issue #15: a signed input URL carries its signature in the query string
// (`?X-Amz-Signature=...`), a credential like the S3 keys. It stays in the task's row while
// the task may still run (the worker needs it; a failed task may be retried) and is dropped
// from the row when the task completes, as the credentials are (tasks/model.ts
// PARAMS_WITHOUT_SECRETS). The Task on the wire never shows it, and no log line has it.

const kinds = await databaseKinds();

const SIGNATURE = 'f00dfeed5ign4tur3c0ffee';
const CREDENTIAL = 'AKIASIGNEDURLKEY';
const QUERY = `?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=${CREDENTIAL}%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=${SIGNATURE}`;

interface StoredParams {
  input: { url?: string; credentials?: unknown };
  storage: { credentials?: unknown };
}

async function storedParams(server: TestServer, id: string): Promise<StoredParams> {
  const rows = await server.running.core.db.query<{ params: StoredParams }>('SELECT params FROM tasks WHERE id = $1', [
    id,
  ]);
  const params = rows[0]?.params;
  assert.ok(params, `task ${id} in the database`);
  return params;
}

function assertNoSignature(texts: string[], where: string): void {
  for (const t of texts) {
    assert.ok(!t.includes(SIGNATURE), `the signature in ${where}: ${t.slice(0, 400)}`);
    assert.ok(!t.includes(CREDENTIAL), `the signed URL's credential in ${where}: ${t.slice(0, 400)}`);
  }
}

describe('a task with a signed input URL, through the API and a worker', () => {
  let server: TestServer;
  let s3: TestS3;
  let web: TestHttp;
  let key: string;
  /** The request URLs the input server was asked for, query included. */
  const asked: string[] = [];
  const responses: string[] = [];
  const recording =
    (route: Route): Route =>
    (req, res) => {
      asked.push(req.url ?? '');
      route(req, res);
    };

  before(async () => {
    let clip: string;
    [s3, clip] = await Promise.all([startS3(), makeClip({ width: 320, height: 180, seconds: 2 })]);
    web = await startHttp({ '/clip.mp4': recording(serveFile(clip)), '/gone.mp4': recording(status(404)) });
    // Debug level: the lines the pipeline writes at each step are searched as well.
    server = await startTestServer({
      roles: { api: true, worker: true },
      settings: { ffmpegThreads: 1, logLevel: 'debug' },
    });
    key = await server.key('alice');
  });
  after(async () => {
    await server?.stop();
    await Promise.all([s3?.close(), web?.close()]);
  });

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await server.call(method, path, { key, ...(body === undefined ? {} : { body }) });
    responses.push(JSON.stringify(res.body));
    return res;
  }

  async function post(url: string): Promise<{ id: string; input: { url: string } }> {
    const bucket = await s3.createBucket();
    const res = await call('POST', '/api/transcode', {
      input: { url },
      storage: {
        type: 's3',
        endpoint: s3.endpoint,
        bucket,
        credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: s3.credentials.secretAccessKey },
      },
      outputs: { mp4: { path: '/out' } },
      profiles: [{ name: 'small', width: 320, height: 180, bitrate: 300_000 }],
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return { id: res.body.id, input: res.body.params['transcode-file'].input };
  }

  const settle = (id: string) =>
    waitFor(
      async () => {
        const res = await call('GET', `/api/task/${id}`);
        return ['completed', 'failed', 'cancelled'].includes(res.body.status.phase) ? res.body : undefined;
      },
      60_000,
      `task ${id} to settle`,
    );

  it('fetches with the signature, then keeps neither it nor the credentials once completed', async () => {
    const signed = web.url('/clip.mp4') + QUERY;
    const created = await post(signed);
    assert.equal(created.input.url, web.url('/clip.mp4'), 'the Task shows the URL without its query');
    const task = await settle(created.id);
    assert.equal(task.status.phase, 'completed', task.status.errorMessage);
    assert.ok(
      asked.includes(`/clip.mp4${QUERY}`),
      `the input server was asked with the signature: ${asked.join(', ')}`,
    );

    const params = await storedParams(server, created.id);
    assert.equal(params.input.url, web.url('/clip.mp4'));
    assert.equal(params.storage.credentials, undefined, 'the S3 credentials are gone');
    const stored = JSON.stringify(params);
    assert.ok(!stored.includes('?') && !stored.includes('X-Amz'), `a query string is left in the row: ${stored}`);
  });

  it('keeps the signature in the row of a failed task, which may be retried, and shows it nowhere', async () => {
    const created = await post(web.url('/gone.mp4') + QUERY);
    const task = await settle(created.id);
    assert.equal(task.status.phase, 'failed');
    assert.equal(task.params['transcode-file'].input.url, web.url('/gone.mp4'));
    assert.equal((await storedParams(server, created.id)).input.url, web.url('/gone.mp4') + QUERY);
  });

  it('showed the signature in no response and no log line', () => {
    assert.ok(responses.length > 4 && server.logs.lines.length > 10, 'there were responses and log lines to look at');
    assert.ok(server.logs.text.includes('/clip.mp4'), 'the input is logged, without its query');
    assertNoSignature(responses, 'a response');
    assertNoSignature(server.logs.lines, 'a log line');
  });
});

// The completion's SQL on both databases, without a transcode: Queue.complete is the one
// place that forgets a task's secrets.
for (const { kind, skip } of kinds) {
  describe(`completing a task drops its secrets from the row (${kind} database)`, { skip }, () => {
    let server: TestServer;

    before(async () => {
      server = await startTestServer({ database: kind, roles: { api: true, worker: false } });
      await server.key('bob');
    });
    after(() => server?.stop());

    async function createAndComplete(input: Record<string, unknown>): Promise<StoredParams> {
      const { tasks, queue } = server.running.core;
      const storage = {
        type: 's3',
        endpoint: 'http://127.0.0.1:9000',
        bucket: 'out',
        credentials: { accessKeyId: 'AKIA', secretAccessKey: 'sEcReT' },
      };
      const row = await tasks.create({
        owner: 'bob',
        projectId: '00000000-0000-4000-8000-000000000000',
        type: 'transcode-file',
        params: { input, storage, outputs: { mp4: { path: '/o' } } },
        requesterId: null,
        maxQueuedPerOwner: 100,
      });
      const claimed = await queue.claim('test-worker', 1);
      assert.deepEqual(
        claimed.map((t) => t.id),
        [row.id],
      );
      assert.deepEqual((await storedParams(server, row.id)).input, input, 'a running task keeps its input as sent');
      assert.ok(await queue.complete(row.id, 'test-worker', {}));
      return storedParams(server, row.id);
    }

    it('an input URL loses its query and fragment', async () => {
      const params = await createAndComplete({ url: `https://videos.example.com/a/b.mp4${QUERY}#t=10` });
      assert.deepEqual(params.input, { url: 'https://videos.example.com/a/b.mp4' });
      assert.equal(params.storage.credentials, undefined);
    });

    it('an input URL without a query is kept as it is', async () => {
      const params = await createAndComplete({
        url: 'ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/v.mp4',
      });
      assert.deepEqual(params.input, {
        url: 'ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/v.mp4',
      });
    });

    it('an S3 input loses its credentials and keeps the rest', async () => {
      const input = {
        type: 's3',
        endpoint: 'http://127.0.0.1:9000',
        bucket: 'in',
        path: '/v.mp4',
        credentials: { accessKeyId: 'AKIA', secretAccessKey: 'sEcReT' },
      };
      const params = await createAndComplete(input);
      assert.deepEqual(params.input, { type: 's3', endpoint: 'http://127.0.0.1:9000', bucket: 'in', path: '/v.mp4' });
    });
  });
}
