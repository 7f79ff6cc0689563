// Deep nesting is the caller's mistake, never a 5xx (issue #25, hole 2): a response_format schema
// nested 100,000 deep was a 500 (RangeError in JSON.stringify) and `{"const": [[[...2000 deep]]]}`
// a 502. Every JSON body, of both APIs and of an orchestrator, is refused with a 400 naming
// MEDIAPLANE_BODY_MAX_DEPTH's limit before it is built; what fits under the limit is answered.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startOrchestrator } from '../../src/llm/orchestrator/index.ts';
import { MODELS_DIR, quietLog, testConfig, TINY } from '../helpers/llm.ts';
import { startTestServer, transcodeBody, type TestServer } from '../helpers/server.ts';
import { orchestratorOptions } from '../../src/main.ts';

const MAX_DEPTH = 128;
const TOO_DEEP = `request body is nested deeper than ${MAX_DEPTH} levels`;

/** `{"not": {"not": ... {}}}`, `levels` objects deep at 7 bytes a level: 100,000 fit the default body limit. */
const deepSchema = (levels: number): string => `${'{"not":'.repeat(levels - 1)}{}${'}'.repeat(levels - 1)}`;
/** `{"type": "array", "items": ... {"type": "null"}}`, `levels` objects deep: a schema the grammar supports. */
const deepItems = (levels: number): string =>
  `${'{"type":"array","items":'.repeat(levels - 1)}{"type":"null"}${'}'.repeat(levels - 1)}`;
/** `{"const": [[[...]]]}` with `levels` arrays in the const. */
const deepConst = (levels: number): string => `{"const":${'['.repeat(levels)}${']'.repeat(levels)}}`;

/** A chat body around `schema`, with room for the ~500 tokens of a const 124 arrays deep. */
const chatWithSchema = (schema: string): string =>
  `{"model":${JSON.stringify(TINY)},"messages":[{"role":"user","content":"hi"}],"max_tokens":600,"seed":1,` +
  `"response_format":{"type":"json_schema","json_schema":{"name":"deep","schema":${schema}}}}`;
/** The chat body's own levels above its schema: the body, response_format, json_schema. */
const CHAT_LEVELS = 3;

/** The OpenAI error of a body past the limit; under /llm with `detail` beside it. */
const openAiTooDeep = (llm = false) => ({
  error: { message: TOO_DEEP, type: 'invalid_request_error', param: null, code: 'invalid_request' },
  ...(llm ? { detail: { msg: TOO_DEEP } } : {}),
});

async function post(url: string, auth: string, body: string): Promise<{ status: number; json: unknown; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' },
    body,
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, json, text };
}

describe('request bodies nested too deeply (issue #25)', () => {
  let server: TestServer;
  let key: string;
  let secret: string;

  before(async () => {
    server = await startTestServer({
      roles: { api: true, worker: false, gateway: true, orchestrator: true },
      settings: { modelsDir: MODELS_DIR, llmGpu: 'cpu', orchestratorModels: [TINY], gatewayPollMs: 60_000 },
    });
    key = await server.key('alice');
    secret = readFileSync(join(server.dataDir, 'orchestrator-secret'), 'utf8').trim();
  });
  after(() => server.stop());

  it('the schema nested 100,000 deep and the const nested 2000 deep are a 400 on both LLM routes', async () => {
    for (const schema of [deepSchema(100_000), deepConst(2000)]) {
      for (const path of ['/v1/chat/completions', '/llm']) {
        const r = await post(`${server.url}${path}`, key, chatWithSchema(schema));
        assert.equal(r.status, 400, `${path}: ${r.text.slice(0, 300)}`);
        assert.deepEqual(r.json, openAiTooDeep(path === '/llm'));
      }
    }
  });

  it('the local orchestrator refuses them with the same 400 (a caller with its secret)', async () => {
    const r = await post(`${server.url}/orchestrator/v1/chat/completions`, secret, chatWithSchema(deepSchema(100_000)));
    assert.equal(r.status, 400, r.text.slice(0, 300));
    assert.deepEqual(r.json, openAiTooDeep());
  });

  it('a deep body on POST /api/transcode and /api/webhook is a 400 in the task API shape', async () => {
    const input = `{"url":"http://127.0.0.1:9/v.mp4","extra":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    const body = JSON.stringify(transcodeBody()).replace(/"input":\{[^}]*\}/, `"input":${input}`);
    for (const path of ['/api/transcode', '/api/webhook']) {
      const r = await post(`${server.url}${path}`, key, body);
      assert.equal(r.status, 400, `${path}: ${r.text.slice(0, 300)}`);
      assert.deepEqual(r.json, { errors: [TOO_DEEP] });
    }
  });

  it('counts levels exactly: a body at the limit is read (and judged by its schema), one level more is not', async () => {
    const atLimit = (levels: number) => `{"input":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
    const ok = await post(`${server.url}/api/transcode`, key, atLimit(MAX_DEPTH));
    assert.equal(ok.status, 422, ok.text.slice(0, 300));
    assert.doesNotMatch(ok.text, /nested deeper/);
    const over = await post(`${server.url}/api/transcode`, key, atLimit(MAX_DEPTH + 1));
    assert.equal(over.status, 400);
    assert.deepEqual(over.json, { errors: [TOO_DEEP] });
    // Brackets inside strings are text, not levels, escaped quotes and backslashes around them too.
    const inString = JSON.stringify({ input: { url: '\\"['.repeat(10_000), a: '\\' }, storage: 'x' });
    const text = await post(`${server.url}/api/transcode`, key, inString);
    assert.equal(text.status, 422, text.text.slice(0, 300));
  });

  it("a schema or a const as deep as the limit allows is answered or refused as the caller's mistake, never a 5xx", async () => {
    const room = MAX_DEPTH - CHAT_LEVELS;
    for (const levels of [room, 40]) {
      const items = await post(`${server.url}/v1/chat/completions`, key, chatWithSchema(deepItems(levels)));
      assert.ok(items.status === 200 || items.status === 400, `${items.status}: ${items.text.slice(0, 300)}`);
      if (items.status === 400) assert.match(items.text, /"param":"response_format\.json_schema\.schema[.\w]*"/);
      // The const nests one level below its schema object: the whole body is exactly at the limit.
      const literal = '['.repeat(levels - 1) + ']'.repeat(levels - 1);
      const c = await post(`${server.url}/v1/chat/completions`, key, chatWithSchema(deepConst(levels - 1)));
      assert.ok(c.status === 200 || c.status === 400, `${c.status}: ${c.text.slice(0, 300)}`);
      const content = (c.json as { choices?: Array<{ message: { content: string } }> }).choices?.[0]?.message.content;
      if (c.status === 200) assert.deepEqual(JSON.parse(content ?? ''), JSON.parse(literal), 'the answer is the const');
      else assert.equal((c.json as { error: { type: string } }).error.type, 'invalid_request_error');
    }
  });
});

describe('a standalone orchestrator', () => {
  it('refuses a body nested too deeply with a 400 in the OpenAI shape', async () => {
    const orch = await startOrchestrator({
      options: orchestratorOptions(testConfig({ host: '127.0.0.1', port: 0, orchestratorModels: [] })),
      log: quietLog,
    });
    try {
      const r = await post(`${orch.url}/v1/chat/completions`, 'none', chatWithSchema(deepConst(2000)));
      assert.equal(r.status, 400, r.text.slice(0, 300));
      assert.deepEqual(r.json, openAiTooDeep());
    } finally {
      await orch.close();
    }
  });
});
