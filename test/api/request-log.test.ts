import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startHttp, status, type TestHttp } from '../helpers/http-input.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

// The log as a person reads it at the default level (info): one line a request of the API,
// none for the console's files and the probes, a refusal's reason on its line, and a task
// that failed because of its input told at info without a stack trace.

interface Line {
  level: number;
  msg: string;
  reqId?: string;
  request?: { method: string; url: string; statusCode: number; ms: number; reason?: string };
  taskId?: string;
  err?: unknown;
  stack?: unknown;
}

const INFO = 30;
let server: TestServer;
let web: TestHttp;
let key = '';

const lines = (): Line[] => server.logs.lines.map((l) => JSON.parse(l) as Line);
const since = (n: number): Line[] => lines().slice(n);
const requestLines = (from: Line[], path: string) => from.filter((l) => l.request?.url.split('?')[0] === path);

before(async () => {
  web = await startHttp({ '/gone.mp4': status(404) });
  server = await startTestServer({});
  key = await server.key('logs');
});

after(async () => {
  await server?.stop();
  await web?.close();
});

describe('request log at info', () => {
  it("writes nothing for the console's page and files, nor for the probes", async () => {
    const dist = fileURLToPath(new URL('../../console/dist/assets/', import.meta.url));
    const asset = readdirSync(dist).find((f) => f.endsWith('.js'));
    const start = lines().length;
    const paths = ['/', '/favicon.svg', '/assets/no-such-file.js', '/healthz', '/readyz', '/metrics'];
    if (asset) paths.push(`/assets/${asset}`);
    for (const path of paths) {
      const res = await fetch(server.url + path);
      await res.arrayBuffer();
    }
    const written = since(start);
    assert.deepEqual(written, [], JSON.stringify(written));
  });

  it('writes one line for an API request: method, URL, status and duration', async () => {
    const start = lines().length;
    const res = await server.call('GET', '/api/task?limit=1', { key });
    assert.equal(res.status, 200);
    const written = since(start);
    const mine = requestLines(written, '/api/task');
    assert.equal(mine.length, 1, JSON.stringify(written));
    assert.equal(written.length, 1, `nothing else for one request: ${JSON.stringify(written)}`);
    const line = mine[0] as Line;
    assert.equal(line.level, INFO);
    assert.equal(line.request?.method, 'GET');
    assert.equal(line.request?.statusCode, 200);
    assert.equal(typeof line.request?.ms, 'number');
    assert.match(line.msg, /^GET \/api\/task\?limit=1 200 \d+ ms$/);
  });

  it('writes a 422 at info with the reason the client was given', async () => {
    const start = lines().length;
    const res = await server.call('POST', '/api/asset/upload/url', {
      key,
      body: { name: 'x', url: 'ftp://example.com/v.mp4' },
    });
    assert.equal(res.status, 422);
    const written = requestLines(since(start), '/api/asset/upload/url');
    assert.equal(written.length, 1, JSON.stringify(since(start)));
    const line = written[0] as Line;
    assert.equal(line.level, INFO);
    assert.equal(line.request?.statusCode, 422);
    assert.equal(line.request?.reason, res.body.errors.join('; '));
    assert.match(line.msg, /422 \d+ ms: url: must start with https:\/\//);
  });

  it('writes a task whose input answers 404 at info, with its reason and no stack trace', async () => {
    const created = await server.call('POST', '/api/asset/upload/url', {
      key,
      body: { name: 'gone', url: web.url('/gone.mp4') },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const taskId = created.body.task.id as string;
    const failed = await waitFor(
      async () => lines().find((l) => l.taskId === taskId && l.msg.startsWith('task failed')),
      60_000,
      'the task failure line',
    );
    const task = await server.call('GET', `/api/task/${taskId}`, { key });
    assert.equal(task.body.status.phase, 'failed');
    assert.equal(failed.level, INFO, JSON.stringify(failed));
    assert.equal(failed.msg, `task failed: ${task.body.status.errorMessage}`);
    assert.equal(failed.err, undefined, 'no error object, so no stack');
    assert.ok(!JSON.stringify(failed).includes('"stack"'), JSON.stringify(failed));
    const warnings = lines().filter((l) => l.taskId === taskId && l.level > INFO);
    assert.deepEqual(warnings, [], 'nothing about this task above info');
  });

  it('writes no line that says undefined', () => {
    const bad = server.logs.lines.filter((l) => l.includes('undefined'));
    assert.deepEqual(bad, []);
  });
});
