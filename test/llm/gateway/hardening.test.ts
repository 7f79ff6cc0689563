// Issue #15, the LLM side: no text generation without a key or a charge. The local orchestrator
// of `mediaplane start` asks for a secret kept in the data dir, a standalone one on a public
// address refuses to start without one, secrets are compared in constant time and never
// logged or answered; the chat request's errors are the caller's (content type, body at the
// limit, max_tokens beyond the model's context).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import { startOrchestrator } from '../../../src/llm/orchestrator/index.ts';
import { secretMatches } from '../../../src/lib/bearer.ts';
import type { RoleSet } from '../../../src/main.ts';
import { MODELS_DIR, quietLog, testConfig, TINY } from '../../helpers/llm.ts';
import { startTestServer, waitFor, type TestServer } from '../../helpers/server.ts';
import { orchestratorOptions } from '../../../src/main.ts';

const BIN = fileURLToPath(new URL('../../../bin/mediaplane.js', import.meta.url));
// What `mediaplane start` runs, less the worker (no transcoding here).
const START_ROLES: RoleSet = { api: true, worker: false, gateway: true, orchestrator: true };
const BODY_LIMIT = 4096;
const SECRET_FILE = 'orchestrator-secret';
/** The longest stop string (issue #25: 800 KB of them stalled the event loop for 1.6 s). */
const STOP_MAX_LENGTH = 256;

const dirs: string[] = [];
const tempDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'mediaplane-hardening-'));
  dirs.push(d);
  return d;
};
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const startSettings = (over: Record<string, unknown> = {}) => ({
  modelsDir: MODELS_DIR,
  llmGpu: 'cpu',
  maxNumSeqs: 2,
  gatewayPollMs: 200,
  bodyLimitBytes: BODY_LIMIT,
  logLevel: 'debug',
  ...over,
});

/** Every response body the tests saw, to check that no secret is ever answered. */
const answered: string[] = [];
async function send(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; text: string; json: any }> {
  const res = await fetch(url, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: init.headers ?? {},
    ...(init.body === undefined ? {} : { body: init.body }),
  });
  const text = await res.text();
  answered.push(text);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, text, json };
}

const chat = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: TINY,
  messages: [{ role: 'user', content: 'hi' }],
  max_tokens: 8,
  seed: 1,
  ...over,
});
const jsonHeaders = (auth?: string): Record<string, string> => ({
  'content-type': 'application/json',
  ...(auth ? { authorization: `Bearer ${auth}` } : {}),
});

/** A remote orchestrator that offers nothing and records what gateways send it. */
async function recordingOrchestrator(): Promise<{ url: string; seen: IncomingHttpHeaders[]; close(): Promise<void> }> {
  const seen: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    seen.push(req.headers);
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ engine: 'fake', pricePerToken: 0, models: [] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('mediaplane start: the local orchestrator serves its gateway only', () => {
  let server: TestServer;
  let remote: Awaited<ReturnType<typeof recordingOrchestrator>>;
  let key: string;
  let secret: string;

  before(async () => {
    remote = await recordingOrchestrator();
    server = await startTestServer({
      roles: START_ROLES,
      settings: startSettings({ orchestratorModels: [TINY], gatewayOrchestrators: [remote.url] }),
    });
    key = await server.key('alice');
    // Read here, asserted in its own test: without it, every other hole still shows its own failure.
    const file = join(server.dataDir, SECRET_FILE);
    secret = existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
    await waitFor(
      async () =>
        (await send(`${server.url}/v1/models`, { headers: jsonHeaders(key) })).json?.data?.some(
          (m: { id: string }) => m.id === TINY,
        ),
      15_000,
      'the gateway to see the local model',
    );
  });
  after(async () => {
    await server.stop();
    await remote.close();
  });

  test('the curl of issue #15 (no Authorization) is 401 at every generating route; the gateway path still answers', async () => {
    const curl = await send(`${server.url}/orchestrator/v1/chat/completions`, {
      headers: jsonHeaders(),
      body: JSON.stringify(chat()),
    });
    assert.equal(curl.status, 401, curl.text.slice(0, 300));
    assert.equal(curl.json.error.type, 'authentication_error');
    for (const auth of ['wrong', `${secret}x`, secret.slice(0, -1), key]) {
      const r = await send(`${server.url}/orchestrator/v1/chat/completions`, {
        headers: jsonHeaders(auth),
        body: JSON.stringify(chat()),
      });
      assert.equal(r.status, 401, 'a wrong secret, or an API key, is no orchestrator secret');
    }
    assert.equal((await send(`${server.url}/orchestrator/capabilities`)).status, 401);
    assert.equal((await send(`${server.url}/orchestrator/healthz`)).status, 200, 'liveness stays open');
    // The secret itself opens them (it is what the gateway sends).
    assert.equal((await send(`${server.url}/orchestrator/capabilities`, { headers: jsonHeaders(secret) })).status, 200);

    const viaGateway = await send(`${server.url}/v1/chat/completions`, {
      headers: jsonHeaders(key),
      body: JSON.stringify(chat()),
    });
    assert.equal(viaGateway.status, 200, viaGateway.text.slice(0, 300));
    assert.equal(viaGateway.json.usage.completion_tokens, 8);
    const ledger = await send(`${server.url}/api/ledger`, { headers: jsonHeaders(key) });
    assert.equal(
      ledger.json.entries.filter((e: { kind: string }) => e.kind === 'charge').length,
      1,
      'the answer is on the ledger',
    );
  });

  test('the secret is generated into the data dir, readable by its owner only', () => {
    const file = join(server.dataDir, SECRET_FILE);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.ok(secret.length >= 32, 'a long random secret');
  });

  test('the local secret goes to the local orchestrator only, never to a remote one', async () => {
    await waitFor(async () => remote.seen.length > 0, 5_000, 'the gateway to poll the remote orchestrator');
    assert.ok(
      remote.seen.every((h) => h.authorization === undefined),
      'no shared secret is set, so none is sent',
    );
    assert.ok(!JSON.stringify(remote.seen).includes(secret));
  });

  test('a wrong content type is a 415 invalid_request_error, on the gateway and the orchestrator', async () => {
    const body = JSON.stringify(chat());
    for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
      for (const path of ['/v1/chat/completions', '/llm']) {
        const r = await send(`${server.url}${path}`, {
          headers: { authorization: `Bearer ${key}`, 'content-type': type },
          body,
        });
        assert.equal(r.status, 415, `${type} ${path}: ${r.text.slice(0, 300)}`);
        assert.deepEqual(r.json.error, {
          message: 'Content-Type must be application/json',
          type: 'invalid_request_error',
          param: null,
          code: 'unsupported_media_type',
        });
      }
      const o = await send(`${server.url}/orchestrator/v1/chat/completions`, {
        headers: { authorization: `Bearer ${secret}`, 'content-type': type },
        body,
      });
      assert.equal(o.status, 400, o.text.slice(0, 300));
      assert.equal(o.json.error.type, 'invalid_request_error');
    }
  });

  test('a chat body of exactly MEDIAPLANE_BODY_LIMIT_BYTES is answered (the gateway adds "stream":true on the way); one byte more is 413', async () => {
    const base = JSON.stringify(chat({ max_tokens: 2, messages: [{ role: 'user', content: '' }] }));
    const pad = BODY_LIMIT - Buffer.byteLength(base);
    const atLimit = JSON.stringify(
      chat({
        max_tokens: 2,
        messages: [{ role: 'user', content: 'ab '.repeat(Math.floor(pad / 3)) + 'a'.repeat(pad % 3) }],
      }),
    );
    assert.equal(Buffer.byteLength(atLimit), BODY_LIMIT);
    const ok = await send(`${server.url}/v1/chat/completions`, { headers: jsonHeaders(key), body: atLimit });
    assert.equal(ok.status, 200, ok.text.slice(0, 300));
    assert.equal(ok.json.usage.completion_tokens, 2);

    const over = await send(`${server.url}/v1/chat/completions`, { headers: jsonHeaders(key), body: `${atLimit} ` });
    assert.equal(over.status, 413, over.text.slice(0, 300));
    assert.equal(over.json.error.type, 'invalid_request_error');
    assert.equal(over.json.error.code, 'payload_too_large');
  });

  test("max_tokens beyond the model's context is refused with 400 context_length_exceeded naming max_tokens", async () => {
    for (const maxTokens of [1_000_000, 4097]) {
      const r = await send(`${server.url}/v1/chat/completions`, {
        headers: jsonHeaders(key),
        body: JSON.stringify(chat({ max_tokens: maxTokens })),
      });
      assert.equal(r.status, 400, r.text.slice(0, 300));
      assert.equal(r.json.error.type, 'invalid_request_error');
      assert.equal(r.json.error.code, 'context_length_exceeded');
      assert.match(r.json.error.message, new RegExp(`^max_tokens: must be at most 4096, .*\\(got ${maxTokens}\\)$`));
      // The orchestrator refuses it too (a gateway that did not know the context).
      const o = await send(`${server.url}/orchestrator/v1/chat/completions`, {
        headers: jsonHeaders(secret),
        body: JSON.stringify(chat({ max_tokens: maxTokens })),
      });
      assert.equal(o.status, 400, o.text.slice(0, 300));
      assert.equal(o.json.error.code, 'context_length_exceeded');
      assert.match(o.json.error.message, /^max_tokens: must be at most 4096/);
    }
    const past = await send(`${server.url}/v1/chat/completions`, {
      headers: jsonHeaders(key),
      body: JSON.stringify(chat({ max_tokens: 1_000_001 })),
    });
    assert.equal(past.status, 400);
    assert.match(past.json.error.message, /^max_tokens: must be between 1 and/);
  });

  test('stop: at most 4 strings of at most 256 characters each, on every route that takes it (issue #25)', async () => {
    const rule = 'stop: must be a string or an array of at most 4 non-empty strings, each at most 256 characters';
    const tooLong = 'x'.repeat(STOP_MAX_LENGTH + 1);
    const routes = [
      { path: '/v1/chat/completions', body: (stop: unknown) => chat({ stop }), auth: key },
      {
        path: '/v1/completions',
        body: (stop: unknown) => ({ model: TINY, prompt: 'hi', max_tokens: 4, stop }),
        auth: key,
      },
      { path: '/orchestrator/v1/chat/completions', body: (stop: unknown) => chat({ stop }), auth: secret },
    ];
    for (const route of routes)
      for (const stop of [tooLong, ['a', tooLong], ['a', 'b', 'c', 'd', 'e']]) {
        const r = await send(`${server.url}${route.path}`, {
          headers: jsonHeaders(route.auth),
          body: JSON.stringify(route.body(stop)),
        });
        assert.equal(r.status, 400, `${route.path}: ${r.text.slice(0, 300)}`);
        assert.deepEqual(r.json.error, {
          message: rule,
          type: 'invalid_request_error',
          param: 'stop',
          code: 'invalid_request',
        });
      }
    // The bound itself is answered: four stop strings of the longest length.
    const atBound = Array.from({ length: 4 }, (_, i) => String(i).repeat(STOP_MAX_LENGTH));
    const ok = await send(`${server.url}/v1/chat/completions`, {
      headers: jsonHeaders(key),
      body: JSON.stringify(chat({ stop: atBound })),
    });
    assert.equal(ok.status, 200, ok.text.slice(0, 300));
  });

  test('the secret appears in no log line and no response', async () => {
    const metrics = await send(`${server.url}/metrics`);
    assert.equal(metrics.status, 200);
    assert.ok(server.logs.lines.length > 10, 'the server logged (debug)');
    assert.ok(!server.logs.text.includes(secret), 'the secret is in a log line');
    assert.ok(answered.length > 10);
    assert.ok(
      answered.every((text) => !text.includes(secret)),
      'the secret is in a response',
    );
  });
});

describe('800 KB of stop strings (issue #25)', () => {
  test('are refused before any engine sees them, naming stop', async () => {
    // A gateway alone, with the default body limit: the request is refused by its schema.
    const server = await startTestServer({ roles: { api: false, worker: false, gateway: true } });
    try {
      const key = await server.key('alice');
      for (const stop of ['ab'.repeat(400_000), Array.from({ length: 4 }, (_, i) => String(i).repeat(200_000))]) {
        const r = await send(`${server.url}/v1/chat/completions`, {
          headers: jsonHeaders(key),
          body: JSON.stringify(chat({ stop })),
        });
        assert.equal(r.status, 400, r.text.slice(0, 300));
        assert.equal(r.json.error.param, 'stop');
        assert.match(r.json.error.message, /^stop: .*each at most 256 characters$/);
      }
    } finally {
      await server.stop();
    }
  });
});

describe('the local orchestrator secret across restarts', () => {
  test('kept in the data dir and reused; MEDIAPLANE_ORCHESTRATOR_SECRET wins when set', async () => {
    const dataDir = tempDir();
    // No warm model: the restarts do not load one (the gateway still lists the cold ones).
    const first = await startTestServer({ dataDir, roles: START_ROLES, settings: startSettings() });
    const secret = readFileSync(join(dataDir, SECRET_FILE), 'utf8').trim();
    await first.stop();

    const second = await startTestServer({ dataDir, roles: START_ROLES, settings: startSettings() });
    try {
      assert.equal(readFileSync(join(dataDir, SECRET_FILE), 'utf8').trim(), secret, 'the same secret after a restart');
      assert.equal(
        (await send(`${second.url}/orchestrator/capabilities`, { headers: jsonHeaders(secret) })).status,
        200,
      );
      const key = await second.key('bob');
      await waitFor(
        async () => (await send(`${second.url}/v1/models`, { headers: jsonHeaders(key) })).json?.data?.length > 0,
        15_000,
        'the gateway to reach the local orchestrator',
      );
      assert.ok(!second.logs.text.includes(secret));
    } finally {
      await second.stop();
    }

    const configured = 'configured-orchestrator-secret-0123456789';
    const third = await startTestServer({
      dataDir,
      roles: START_ROLES,
      settings: startSettings({ orchestratorSecret: configured }),
    });
    try {
      assert.equal(
        (await send(`${third.url}/orchestrator/capabilities`, { headers: jsonHeaders(configured) })).status,
        200,
      );
      assert.equal(
        (await send(`${third.url}/orchestrator/capabilities`, { headers: jsonHeaders(secret) })).status,
        401,
        'the file is not used when the setting is',
      );
      const key = await third.key('carol');
      await waitFor(
        async () => (await send(`${third.url}/v1/models`, { headers: jsonHeaders(key) })).json?.data?.length > 0,
        15_000,
        'the gateway to reach the local orchestrator',
      );
      assert.ok(!third.logs.text.includes(configured));
    } finally {
      await third.stop();
    }
  });
});

describe('an orchestrator anyone could reach asks for a secret', () => {
  test('`mediaplane orchestrator` on 0.0.0.0 without MEDIAPLANE_ORCHESTRATOR_SECRET refuses to start, naming the setting', () => {
    const env = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      MEDIAPLANE_HOST: '0.0.0.0',
      MEDIAPLANE_PORT: '0',
      MEDIAPLANE_MODELS_DIR: tempDir(),
      MEDIAPLANE_LOG_LEVEL: 'warn',
    };
    const r = spawnSync(process.execPath, [BIN, 'orchestrator'], { env, encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.status, 2, `exit status (stderr: ${r.stderr})`);
    assert.match(r.stderr, /MEDIAPLANE_ORCHESTRATOR_SECRET: required when the orchestrator listens on "0\.0\.0\.0"/);
  });

  test('an orchestrator mounted on a shared server without a secret refuses to start; on loopback alone it may', async () => {
    const empty = tempDir();
    const app = Fastify();
    await assert.rejects(
      startOrchestrator({ options: orchestratorOptions(testConfig({ modelsDir: empty })), log: quietLog, app }),
      /MEDIAPLANE_ORCHESTRATOR_SECRET: required by an orchestrator mounted on a shared server/,
    );
    await app.close();
    for (const host of ['10.1.2.3', '::', 'example.com']) {
      await assert.rejects(
        startOrchestrator({ options: orchestratorOptions(testConfig({ modelsDir: empty, host })), log: quietLog }),
        /MEDIAPLANE_ORCHESTRATOR_SECRET: required when the orchestrator listens on/,
        host,
      );
    }
    const local = await startOrchestrator({
      options: orchestratorOptions(testConfig({ modelsDir: empty, host: '127.0.0.1' })),
      log: quietLog,
    });
    await local.close();
  });
});

test('secretMatches: constant-time over digests; wrong length, same length wrong, or no bearer is false', () => {
  const secret = 's3cret-0123456789';
  assert.equal(secretMatches(`Bearer ${secret}`, secret), true);
  assert.equal(secretMatches(`bearer ${secret} `, secret), true);
  assert.equal(secretMatches('Bearer s3cret', secret), false, 'shorter');
  assert.equal(secretMatches(`Bearer ${secret}0`, secret), false, 'longer');
  assert.equal(secretMatches(`Bearer ${secret.slice(0, -1)}X`, secret), false, 'same length, wrong');
  assert.equal(secretMatches(secret, secret), false, 'not a bearer token');
  assert.equal(secretMatches(undefined, secret), false);
  assert.equal(secretMatches('Bearer ', ''), false, 'an empty secret matches nothing');
});
