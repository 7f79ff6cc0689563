// Property-based fuzzing of the public request bodies (issue #15): random JSON, random raw
// bytes and random mutations of valid bodies against POST /api/transcode, /llm and
// /v1/chat/completions on one server running every role but the worker. Whatever comes in:
// no 5xx, the error in its API's own shape, no secret in any response or log line, and the
// server still healthy. Bounded in runs and time; a failure prints fast-check's seed and the
// shrunk counterexample, which replays with `FUZZ_SEED=<seed>`.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { MODELS_DIR, TINY } from '../helpers/llm.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { fuzzOptions } from './options.ts';

const S3_SECRET = 'fuzzSecret/Do-Not-Leak+77';
const S3_ACCESS_KEY = 'AKIAFUZZACCESSKEY';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const validTranscode = (): Json => ({
  input: { url: 'https://videos.example.com/in.mp4?X-Amz-Signature=fuzzsig' },
  storage: {
    type: 's3',
    endpoint: 'https://s3.example.com',
    bucket: 'out',
    credentials: { accessKeyId: S3_ACCESS_KEY, secretAccessKey: S3_SECRET },
  },
  outputs: { hls: { path: '/out/hls' }, mp4: { path: '/out/mp4' } },
  profiles: [{ name: '360p', width: 640, height: 360, bitrate: 900_000, fps: 30 }],
  targetSegmentSizeSecs: 4,
  creatorId: { type: 'unverified', value: 'fuzzer' },
});

const validChat = (): Json => ({
  model: TINY,
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Hello' },
  ],
  max_tokens: 4,
  temperature: 0.5,
  seed: 1,
  stop: ['\n'],
});

/** Every path into a JSON value (object keys and array indexes), the root included. */
function pathsOf(v: Json, prefix: (string | number)[] = []): (string | number)[][] {
  const out = [prefix];
  if (Array.isArray(v)) for (const [i, x] of v.entries()) out.push(...pathsOf(x, [...prefix, i]));
  else if (v !== null && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) out.push(...pathsOf(x, [...prefix, k]));
  return out;
}

type Edit = {
  pick: number;
  op: 'delete' | 'replace' | 'add' | 'inject';
  value: Json;
  key: string;
  char: string;
  at: number;
};

/** Applies one edit at the picked path of a copy of `body`. */
function mutate(body: Json, edit: Edit): Json {
  const copy = structuredClone(body);
  const all = pathsOf(copy);
  const strings = all.filter(
    (p) => typeof p.reduce<Json>((node, k) => (node as Record<string | number, Json>)[k] ?? null, copy) === 'string',
  );
  const paths = edit.op === 'inject' && strings.length > 0 ? strings : all;
  const path = paths[edit.pick % paths.length] ?? [];
  if (path.length === 0) return edit.op === 'replace' ? edit.value : copy;
  const parent = path
    .slice(0, -1)
    .reduce<Json>((node, k) => (node as Record<string | number, Json>)[k] ?? null, copy) as Record<
    string | number,
    Json
  >;
  const last = path.at(-1) as string | number;
  if (edit.op === 'inject') {
    // A character slipped into a string that is otherwise valid, where a whole random value
    // would be refused by the schema before it reached anything deeper.
    const v = parent[last];
    parent[last] =
      typeof v === 'string'
        ? v.slice(0, edit.at % (v.length + 1)) + edit.char + v.slice(edit.at % (v.length + 1))
        : edit.value;
  } else if (edit.op === 'delete') {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
  } else if (edit.op === 'replace') parent[last] = edit.value;
  else if (!Array.isArray(parent)) parent[edit.key] = edit.value;
  else parent.push(edit.value);
  return copy;
}

// Strings where bugs live: control characters, NUL, lone surrogates, path and URL tricks, huge.
const nastyString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(
    '\u0000',
    'a\u0000b',
    '../../etc/passwd',
    '/a/%2e%2e/b',
    'http://127.0.0.1:1/x',
    'http://[::1]/x',
    'ipfs://',
    'x'.repeat(5000),
    '\ud800',
    '€',
    '',
    ' ',
  ),
);
const anyValue: fc.Arbitrary<Json> = fc.oneof(
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json> },
  { weight: 2, arbitrary: nastyString },
  { weight: 1, arbitrary: fc.constantFrom<Json>(1e308, -1e308, 5e-324, -0, 2 ** 53 + 1, -1, 0, 1e6, [], {}, null) },
);
const edit: fc.Arbitrary<Edit> = fc.record({
  pick: fc.nat(),
  op: fc.constantFrom('delete', 'replace', 'replace', 'add', 'inject', 'inject'),
  value: anyValue,
  key: fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.constantFrom('__proto__', 'constructor', 'stream', 'n', 'credentials'),
  ),
  char: fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom('\u0000', '\u0001', '\n', '\u007f') },
    { weight: 2, arbitrary: fc.constantFrom('\u202e', '\ud800', '/../', '%2e', '\\', '?', '#') },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 3 }) },
  ),
  at: fc.nat(),
});
const mutated = (valid: () => Json) =>
  fc.array(edit, { minLength: 1, maxLength: 4 }).map((edits) => edits.reduce(mutate, valid()));

interface Sent {
  path: string;
  body: string;
  contentType: string;
}

const asJson = (body: Json): string => JSON.stringify(body);
const rawBodies = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc.constantFrom(
    '',
    '{',
    '{"a":1,}',
    '[]',
    'null',
    '"x"',
    '{"model":1e999}',
    '\u0000',
    '{"__proto__":{"admin":true}}',
  ),
);
const contentTypes = fc.constantFrom(
  'application/json',
  'application/json',
  'application/json; charset=utf-8',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/JSON',
  '',
);

describe('fuzz: POST bodies against every API', () => {
  let server: TestServer;
  let key: string;
  let orchestratorSecret: string;
  const seen: string[] = [];

  before(async () => {
    server = await startTestServer({
      roles: { api: true, worker: false, gateway: true, orchestrator: true },
      settings: {
        allowPrivateUrls: false,
        modelsDir: MODELS_DIR,
        orchestratorModels: [TINY],
        gatewayPollMs: 60_000,
        maxQueuedPerOwner: 100_000,
        bodyLimitBytes: 64 * 1024,
      },
    });
    key = await server.key('fuzzer');
    orchestratorSecret = readFileSync(join(server.dataDir, 'orchestrator-secret'), 'utf8').trim();
    assert.ok(orchestratorSecret.length >= 16);
  });
  after(() => server.stop());

  async function send(s: Sent): Promise<void> {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (s.contentType) headers['content-type'] = s.contentType;
    const res = await fetch(server.url + s.path, { method: 'POST', headers, body: s.body });
    const text = await res.text();
    seen.push(text, JSON.stringify([...res.headers]));
    const where = `${s.path} ${s.contentType} ${s.body.slice(0, 300)} -> ${res.status} ${text.slice(0, 300)}`;
    assert.ok(res.status < 500, `5xx: ${where}`);
    for (const secret of [S3_SECRET, S3_ACCESS_KEY, key, orchestratorSecret])
      assert.ok(!text.includes(secret), `a secret in the response: ${where}`);
    if (res.status < 400) return;
    const body = JSON.parse(text) as Record<string, unknown>;
    if (s.path.startsWith('/api/')) {
      assert.deepEqual(Object.keys(body), ['errors'], where);
      assert.ok(
        Array.isArray(body.errors) &&
          body.errors.length > 0 &&
          body.errors.every((e) => typeof e === 'string' && e.length > 0),
        where,
      );
    } else {
      // Under /llm, `detail: {msg}` beside `error`, for @livepeer/ai (issue #17).
      assert.deepEqual(Object.keys(body).sort(), s.path === '/llm' ? ['detail', 'error'] : ['error'], where);
      const e = body.error as Record<string, unknown>;
      assert.ok(typeof e.message === 'string' && typeof e.type === 'string' && typeof e.code === 'string', where);
      assert.notEqual(e.type, 'server_error', `a client error typed as the server's: ${where}`);
    }
  }

  const property = (sent: fc.Arbitrary<Sent>) => fc.asyncProperty(sent, (s) => send(s));
  const options = fuzzOptions({ runs: 300, timeLimitMs: 12_000 });

  it('POST /api/transcode: mutations of a valid body', async () => {
    await fc.assert(
      property(
        mutated(validTranscode).map((b) => ({
          path: '/api/transcode',
          body: asJson(b),
          contentType: 'application/json',
        })),
      ),
      options,
    );
  });

  it('POST /llm and /v1/chat/completions: mutations of a valid body, streamed or not', async () => {
    const sent = fc
      .record({ path: fc.constantFrom('/llm', '/v1/chat/completions'), b: mutated(validChat) })
      .map(({ path, b }) => ({ path, body: asJson(b), contentType: 'application/json' }));
    await fc.assert(property(sent), options);
  });

  it('every route: random bytes and random JSON under random content types', async () => {
    const sent = fc.record({
      path: fc.constantFrom('/api/transcode', '/llm', '/v1/chat/completions'),
      body: rawBodies,
      contentType: contentTypes,
    });
    await fc.assert(property(sent), options);
  });

  it('the server stays healthy and no log line carries a secret', async () => {
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    const logs = server.logs.text;
    for (const secret of [S3_SECRET, S3_ACCESS_KEY, key, orchestratorSecret, 'fuzzsig']) {
      assert.ok(!logs.includes(secret), `a secret in the logs: ${secret}`);
    }
    assert.ok(seen.length > 0);
  });
});
