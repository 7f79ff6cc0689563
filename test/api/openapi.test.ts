// /api/openapi.json is made from the schemas that validate requests (issue #16): the task
// API's routes and, on a server running the gateway, the LLM routes with their request and
// response schemas. Routes that need no API key (upload URLs, playback info, /media) say so,
// HEAD routes a route declares are listed, and raw upload bodies are documented as bytes
// (issue #27).

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../helpers/server.ts';

interface Operation {
  summary?: string;
  parameters?: Array<{ name: string; in: string; schema: Record<string, unknown> }>;
  requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown>; type?: string } }> };
  responses: Record<string, { content?: { 'application/json': { schema: Record<string, unknown> } } }>;
  security?: unknown[];
}

/** The operations that need no API key: method and path. */
const KEYLESS = [
  ['put', '/api/asset/upload/direct'],
  ['options', '/api/asset/upload/direct'],
  ['post', '/api/asset/upload/tus'],
  ['options', '/api/asset/upload/tus'],
  ['head', '/api/asset/upload/tus/{id}'],
  ['patch', '/api/asset/upload/tus/{id}'],
  ['delete', '/api/asset/upload/tus/{id}'],
  ['options', '/api/asset/upload/tus/{id}'],
  ['get', '/api/playback/{id}'],
  ['get', '/media/*'],
  ['head', '/media/*'],
  ['options', '/media/*'],
  ['get', '/media/live/{playbackId}/index.m3u8'],
  ['head', '/media/live/{playbackId}/index.m3u8'],
  ['get', '/media/live/{playbackId}/{rendition}/index.m3u8'],
  ['head', '/media/live/{playbackId}/{rendition}/index.m3u8'],
  ['get', '/media/live/{playbackId}/{rendition}/{file}'],
  ['head', '/media/live/{playbackId}/{rendition}/{file}'],
  ['get', '/player/hls.min.js'],
];

describe('the OpenAPI document', () => {
  let server: TestServer;
  let paths: Record<string, Record<string, Operation>>;

  before(async () => {
    server = await startTestServer({
      roles: { api: true, worker: false, gateway: true },
      settings: { gatewayPollMs: 60_000 },
    });
    const res = await server.call('GET', '/api/openapi.json');
    assert.equal(res.status, 200);
    assert.equal(res.body.openapi, '3.1.0');
    paths = res.body.paths;
  });
  after(() => server.stop());

  /** The JSON schema of an operation's response `code`. */
  const responseSchema = (op: Operation | undefined, code: string) =>
    op?.responses[code]?.content?.['application/json'].schema;

  it('lists the chat routes with the chat body, the chat.completion answer and the OpenAI error shape', () => {
    for (const path of ['/v1/chat/completions', '/llm']) {
      const op = paths[path]?.post;
      assert.ok(op, `POST ${path} is in the document`);
      const body = op.requestBody?.content['application/json']?.schema;
      for (const field of ['model', 'messages', 'max_tokens', 'stream', 'temperature'])
        assert.ok(body?.properties?.[field], `${path}: the body documents ${field}`);
      const ok = responseSchema(op, '200') as { properties?: Record<string, unknown> } | undefined;
      for (const field of ['id', 'object', 'choices', 'usage'])
        assert.ok(ok?.properties?.[field], `${path}: 200 ${field}`);
      const error = responseSchema(op, '4XX') as { properties?: { error?: { properties?: object } } } | undefined;
      assert.deepEqual(Object.keys(error?.properties?.error?.properties ?? {}).sort(), [
        'code',
        'message',
        'param',
        'type',
      ]);
    }
  });

  it('lists GET /v1/models and GET /api/ledger with their query and answers', () => {
    const models = paths['/v1/models']?.get;
    assert.ok(models, 'GET /v1/models is in the document');
    assert.ok((responseSchema(models, '200') as { properties?: object }).properties, 'its answer is described');
    const ledger = paths['/api/ledger']?.get;
    assert.ok(ledger, 'GET /api/ledger is in the document');
    assert.deepEqual(
      ledger.parameters?.map((p) => [p.name, p.in, p.schema.type]),
      [['limit', 'query', 'integer']],
    );
    const answer = responseSchema(ledger, '200') as { properties?: Record<string, unknown> };
    assert.deepEqual(Object.keys(answer.properties ?? {}), ['owner', 'balanceUsd', 'entries']);
    const error = responseSchema(ledger, '4XX') as { properties?: Record<string, unknown> };
    assert.deepEqual(Object.keys(error.properties ?? {}), ['errors'], 'the ledger answers in the task API shape');
  });

  it('still lists the task routes', () => {
    assert.ok(paths['/api/transcode']?.post?.requestBody);
    assert.ok(paths['/api/task/{id}']?.get);
    assert.ok(paths['/api/task/{id}/history']?.get, "a task's stored events");
    assert.ok(paths['/api/capabilities']?.get, 'what the server is set up to do');
  });

  it('documents the per-title switch of a request and of each profile (issue #31)', () => {
    const body = JSON.stringify(paths['/api/transcode']?.post?.requestBody);
    assert.match(body, /"perTitle":\{"description":"The per-title ladder for the default ladder/);
    assert.match(body, /"perTitle":\{"description":"Let the per-title ladder choose this rendition's rate/);
  });

  it('says which operations need no API key, and every other one needs it', () => {
    const keyless: string[][] = [];
    for (const [path, ops] of Object.entries(paths))
      for (const [method, op] of Object.entries(ops)) {
        if (op.security?.length === 0) keyless.push([method, path]);
        else assert.deepEqual(op.security, [{ bearer: [] }], `${method} ${path} needs the API key`);
      }
    const sorted = (list: string[][]) => list.map((o) => o.join(' ')).sort();
    assert.deepEqual(sorted(keyless), sorted(KEYLESS));
  });

  it('is true about the key: without one, exactly the operations that need it answer 401', async () => {
    for (const [path, ops] of Object.entries(paths))
      for (const [method, op] of Object.entries(ops)) {
        const url = `${server.url}${path.replace(/\{\w+\}|\*/g, 'x')}`;
        const res = await fetch(url, { method: method.toUpperCase() });
        await res.arrayBuffer();
        const needsKey = op.security?.length !== 0;
        assert.equal(res.status === 401, needsKey, `${method} ${path} answered ${res.status} without a key`);
      }
  });

  it('lists the HEAD routes a route declares, but not the HEAD Fastify adds beside each GET', () => {
    assert.ok(paths['/api/asset/upload/tus/{id}']?.head?.summary, 'tus HEAD');
    assert.ok(paths['/media/*']?.head?.summary, '/media HEAD');
    assert.equal(paths['/api/task/{id}']?.head, undefined);
    assert.equal(paths['/v1/models']?.head, undefined);
  });

  it('documents the raw bodies of the uploads as bytes, not JSON', () => {
    const bodies: [string, string, string][] = [
      ['/api/asset/upload/direct', 'put', 'application/octet-stream'],
      ['/api/asset/upload/tus/{id}', 'patch', 'application/offset+octet-stream'],
    ];
    for (const [path, method, type] of bodies) {
      const content = paths[path]?.[method]?.requestBody?.content ?? {};
      assert.deepEqual(Object.keys(content), [type], `${method} ${path}`);
      assert.deepEqual(content[type]?.schema, { type: 'string', format: 'binary' });
    }
    assert.equal(paths['/api/asset/upload/tus']?.post?.requestBody, undefined, 'tus creation has no body');
  });
});
