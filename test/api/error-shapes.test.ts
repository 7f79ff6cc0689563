// Every error of each API in its API's shape (issue #16): the task API's {"errors": [...]} and
// OpenAI's {"error": {message, type, param, code}}, for the errors of the service's own family
// and Fastify's (bad JSON, wrong content type, body too large, bad Content-Length, unknown
// route), triggered over HTTP on one server running the API, the gateway and an orchestrator.
// The classes no request can reach (configuration, tuning, state files) go through the same
// two mappers in unit tests below.

import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ConfigError } from '../../src/config/index.ts';
import { EmbeddedDbLockedError } from '../../src/db/index.ts';
import { UsageError } from '../../src/cli/args.ts';
import {
  CancelledError,
  ContextLengthExceededError,
  InternalError,
  ModelNotFoundError,
  TimeoutError,
  UpstreamFailedError,
  UpstreamUnavailableError,
  ValidationError,
} from '../../src/lib/errors.ts';
import { StateFileError } from '../../src/lib/state-file.ts';
import { fromFastifyError, openAiWireError, tasksWireError } from '../../src/lib/wire-errors.ts';
import { PromptTooLongError } from '../../src/llm/orchestrator/engine.ts';
import { TuningError } from '../../src/llm/orchestrator/index.ts';
import { MODELS_DIR, TINY } from '../helpers/llm.ts';
import { startTestServer, waitFor, type TestServer } from '../helpers/server.ts';

const BODY_LIMIT = 16 * 1024;
const LLM_PATHS = ['/v1/chat/completions', '/llm'] as const;

/** Exactly the task API's shape: `{"errors": ["...", ...]}`, nothing else. */
function tasksShape(body: unknown, where: string): string[] {
  assert.ok(typeof body === 'object' && body !== null, `${where}: not a JSON object: ${String(body)}`);
  assert.deepEqual(Object.keys(body), ['errors'], where);
  const { errors } = body as { errors: unknown };
  assert.ok(Array.isArray(errors) && errors.length > 0, where);
  for (const e of errors) assert.ok(typeof e === 'string' && e.length > 0, where);
  return errors as string[];
}

interface OpenAiError {
  message: string;
  type: string;
  param: string | null;
  code: string;
}

/**
 * Exactly OpenAI's shape: `{"error": {message, type, param, code}}`, param a string or null;
 * under /llm with `detail: {msg}` beside it, the message again, for @livepeer/ai (issue #17).
 */
function openAiShape(body: unknown, where: string): OpenAiError {
  assert.ok(typeof body === 'object' && body !== null, `${where}: not a JSON object: ${String(body)}`);
  if ('detail' in body) {
    assert.deepEqual(Object.keys(body).sort(), ['detail', 'error'], where);
    const { detail, error } = body as { detail: unknown; error: { message?: unknown } };
    assert.deepEqual(detail, { msg: error.message }, where);
  } else assert.deepEqual(Object.keys(body), ['error'], where);
  const e = (body as { error: Record<string, unknown> }).error;
  assert.deepEqual(Object.keys(e).sort(), ['code', 'message', 'param', 'type'], where);
  assert.ok(typeof e.message === 'string' && e.message.length > 0, where);
  assert.ok(typeof e.type === 'string' && typeof e.code === 'string', where);
  assert.ok(e.param === null || typeof e.param === 'string', where);
  return e as unknown as OpenAiError;
}

/** Sends raw bytes and returns the status and JSON body the server answered before closing. */
function rawRequest(url: string, bytes: string): Promise<{ status: number; body: unknown }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.end(bytes));
    const giveUp = setTimeout(() => socket.destroy(new Error('the server kept the socket open')), 10_000);
    socket.on('data', (d) => (text += d.toString('utf8')));
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(giveUp);
      const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1]);
      resolve({ status, body: JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) });
    });
  });
}

const chat = (over: Record<string, unknown> = {}) => ({
  model: TINY,
  messages: [{ role: 'user', content: 'Hello' }],
  max_tokens: 2,
  ...over,
});

const transcode = () => ({
  input: { url: 'https://example.com/a.mp4' },
  storage: {
    type: 's3',
    endpoint: 'https://s3.example.com',
    bucket: 'b',
    credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
  },
  outputs: { hls: { path: '/h' } },
});

describe('error shapes over HTTP', () => {
  let server: TestServer;
  let key: string;
  let poor: string;

  before(async () => {
    server = await startTestServer({
      roles: { api: true, worker: false, gateway: true, orchestrator: true },
      settings: {
        modelsDir: MODELS_DIR,
        orchestratorModels: [TINY],
        // Priced, so an owner without credit gets 402 (every other case is refused before pricing).
        orchestratorPricePerToken: 0.001,
        gatewayPollMs: 60_000,
        bodyLimitBytes: BODY_LIMIT,
        maxQueuedPerOwner: 1,
        logLevel: 'warn',
      },
    });
    key = await server.key('alice');
    poor = await server.key('bob');
    await waitFor(
      async () =>
        ((await server.call('GET', '/v1/models', { key })).body?.data ?? []).some((m: { id: string }) => m.id === TINY),
      20_000,
      'the gateway to see the local model',
    );
  });
  after(() => server.stop());

  /** POST `raw` with a content type, as a client that sends broken bodies would. */
  const post = (path: string, raw: string, opts: { key?: string; type?: string } = {}) =>
    server.call('POST', path, {
      raw,
      headers: {
        'content-type': opts.type ?? 'application/json',
        ...(opts.key === undefined ? {} : { authorization: `Bearer ${opts.key}` }),
      },
    });

  describe('the task API answers {"errors": [...]}', () => {
    it('bad JSON is a 400', async () => {
      const r = await post('/api/transcode', '{"input":', { key });
      assert.equal(r.status, 400);
      assert.deepEqual(tasksShape(r.body, 'bad JSON'), ['request body is not valid JSON']);
    });

    it('a wrong content type is a 400 (the task API has no 415)', async () => {
      const r = await post('/api/transcode', JSON.stringify(transcode()), {
        key,
        type: 'application/x-www-form-urlencoded',
      });
      assert.equal(r.status, 400);
      assert.deepEqual(tasksShape(r.body, '415'), ['Content-Type must be application/json']);
    });

    it('a body over the limit is a 413', async () => {
      const r = await post('/api/transcode', JSON.stringify({ pad: 'x'.repeat(BODY_LIMIT) }), { key });
      assert.equal(r.status, 413);
      assert.deepEqual(tasksShape(r.body, '413'), ['request body is too large']);
    });

    it('a body longer than its Content-Length is a 400', async () => {
      const body = JSON.stringify(transcode());
      const r = await rawRequest(
        server.url,
        `POST /api/transcode HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n${body}`,
      );
      assert.equal(r.status, 400);
      assert.deepEqual(tasksShape(r.body, 'Content-Length'), [
        'the request is not valid HTTP (does Content-Length match the body?)',
      ]);
    });

    it('an unknown route is a 404, under /api and outside every API', async () => {
      for (const path of ['/api/nothing', '/nothing']) {
        const r = await server.call('GET', path, { key });
        assert.equal(r.status, 404, path);
        assert.deepEqual(tasksShape(r.body, path), ['not found']);
      }
    });

    it('no key, or an unknown one, is a 401 with one message per case, on the tasks and the ledger', async () => {
      for (const path of ['/api/task', '/api/ledger']) {
        const none = await server.call('GET', path);
        assert.equal(none.status, 401, path);
        assert.deepEqual(tasksShape(none.body, path), ['missing API key: send Authorization: Bearer <key>']);
        const wrong = await server.call('GET', path, { key: 'mp_nope' });
        assert.equal(wrong.status, 401, path);
        assert.deepEqual(tasksShape(wrong.body, path), ['invalid API key']);
      }
    });

    it('an unknown task is a 404', async () => {
      const r = await server.call('GET', '/api/task/nope', { key });
      assert.equal(r.status, 404);
      assert.deepEqual(tasksShape(r.body, '404'), ['not found']);
    });

    it('validation is a 422 naming the field, for a body and for a query string (the ledger too)', async () => {
      const body = await server.call('POST', '/api/transcode', { key, body: { ...transcode(), input: { url: 5 } } });
      assert.equal(body.status, 422);
      assert.match(tasksShape(body.body, 'body')[0] ?? '', /^input\.url: /);
      const ledger = await server.call('GET', '/api/ledger?limit=0', { key });
      assert.equal(ledger.status, 422);
      assert.deepEqual(tasksShape(ledger.body, 'ledger'), ['querystring.limit: must be an integer from 1 to 1000']);
    });

    it('too many queued tasks is a 429; an action the task state refuses is a 400', async () => {
      const first = await server.call('POST', '/api/transcode', { key: poor, body: transcode() });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      const second = await server.call('POST', '/api/transcode', { key: poor, body: transcode() });
      assert.equal(second.status, 429);
      tasksShape(second.body, '429');
      const retry = await server.call('POST', `/api/task/${first.body.id}/retry`, { key: poor });
      assert.equal(retry.status, 400);
      tasksShape(retry.body, 'retry');
    });
  });

  describe('the LLM API answers {"error": {message, type, param, code}}', () => {
    it('bad JSON is a 400 invalid_request', async () => {
      for (const path of LLM_PATHS) {
        const r = await post(path, '{"model":', { key });
        assert.equal(r.status, 400, path);
        assert.deepEqual(openAiShape(r.body, path), {
          message: 'request body is not valid JSON',
          type: 'invalid_request_error',
          param: null,
          code: 'invalid_request',
        });
      }
    });

    it('a wrong content type is a 415', async () => {
      for (const path of LLM_PATHS) {
        const r = await post(path, JSON.stringify(chat()), { key, type: 'text/plain' });
        assert.equal(r.status, 415, path);
        assert.equal(openAiShape(r.body, path).code, 'unsupported_media_type');
      }
    });

    it('a body over the limit is a 413', async () => {
      for (const path of LLM_PATHS) {
        const r = await post(path, JSON.stringify(chat({ user: 'x'.repeat(BODY_LIMIT) })), { key });
        assert.equal(r.status, 413, path);
        assert.deepEqual(openAiShape(r.body, path), {
          message: 'request body is too large',
          type: 'invalid_request_error',
          param: null,
          code: 'payload_too_large',
        });
      }
    });

    it('a body longer than its Content-Length is a 400', async () => {
      for (const path of LLM_PATHS) {
        const r = await rawRequest(
          server.url,
          `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n${JSON.stringify(chat())}`,
        );
        assert.equal(r.status, 400, path);
        assert.equal(openAiShape(r.body, path).type, 'invalid_request_error');
      }
    });

    it('an unknown route is a 404 not_found, under /v1, /llm and /orchestrator', async () => {
      for (const path of ['/v1/nothing', '/llm/nothing', '/orchestrator/nothing']) {
        const r = await server.call('GET', path, { key });
        assert.equal(r.status, 404, path);
        assert.deepEqual(openAiShape(r.body, path), {
          message: `no such route: GET ${path}`,
          type: 'not_found_error',
          param: null,
          code: 'not_found',
        });
      }
    });

    it('no key or an unknown one is a 401, with the task API messages; the orchestrator wants its secret', async () => {
      for (const path of [...LLM_PATHS, '/v1/models']) {
        const method = path === '/v1/models' ? 'GET' : 'POST';
        const none = await server.call(method, path, method === 'POST' ? { body: chat() } : {});
        assert.equal(none.status, 401, path);
        assert.deepEqual(openAiShape(none.body, path), {
          message: 'missing API key: send Authorization: Bearer <key>',
          type: 'authentication_error',
          param: null,
          code: 'unauthorized',
        });
        const wrong = await server.call(method, path, {
          key: 'mp_nope',
          ...(method === 'POST' ? { body: chat() } : {}),
        });
        assert.equal(wrong.status, 401, path);
        assert.equal(openAiShape(wrong.body, path).message, 'invalid API key');
      }
      // Before the body is read: an unauthenticated request with a broken body is still a 401.
      assert.equal((await post('/llm', '{"model":')).status, 401);
      for (const path of ['/orchestrator/v1/chat/completions', '/llm/orchestrators']) {
        const r = await server.call('POST', path, { key, body: { url: 'http://127.0.0.1:1' } });
        assert.equal(r.status, 401, path);
        assert.equal(openAiShape(r.body, path).type, 'authentication_error');
      }
    });

    it('an unknown model is a 404 model_not_found about `model`, one without an org too', async () => {
      for (const model of ['nobody/nothing', 'no-org']) {
        const r = await server.call('POST', '/v1/chat/completions', { key, body: chat({ model }) });
        assert.equal(r.status, 404);
        const e = openAiShape(r.body, model);
        assert.equal(e.code, 'model_not_found');
        assert.equal(e.param, 'model');
        assert.equal(e.type, 'not_found_error');
      }
    });

    it("max_tokens beyond the model's context is a 400 context_length_exceeded about `max_tokens`", async () => {
      for (const path of LLM_PATHS) {
        const r = await server.call('POST', path, { key, body: chat({ max_tokens: 1_000_000 }) });
        assert.equal(r.status, 400, path);
        const e = openAiShape(r.body, path);
        assert.equal(e.code, 'context_length_exceeded');
        assert.equal(e.type, 'invalid_request_error');
        assert.equal(e.param, 'max_tokens');
      }
    });

    it('not enough balance is a 402, streamed or not (the stream answers it before it starts)', async () => {
      for (const stream of [false, true]) {
        const r = await server.call('POST', '/v1/chat/completions', { key: poor, body: chat({ stream }) });
        assert.equal(r.status, 402, `stream ${stream}`);
        const e = openAiShape(r.body, `stream ${stream}`);
        assert.equal(e.type, 'insufficient_quota');
        assert.equal(e.code, 'insufficient_balance');
      }
    });

    it('validation is a 400 invalid_request naming the field in message and param', async () => {
      for (const path of LLM_PATHS) {
        const r = await server.call('POST', path, { key, body: chat({ messages: [] }) });
        assert.equal(r.status, 400, path);
        assert.deepEqual(openAiShape(r.body, path), {
          message: 'messages: required, must be a non-empty array',
          type: 'invalid_request_error',
          param: 'messages',
          code: 'invalid_request',
        });
      }
      // Unknown fields are ignored (issue #17); known ones nobody here can give are refused by name.
      const refused = await server.call('POST', '/llm', {
        key,
        body: chat({ audio: { voice: 'alloy' }, n: 0, foo: 1 }),
      });
      assert.equal(refused.status, 400);
      assert.match(openAiShape(refused.body, 'refused').message, /audio: not supported/);
      assert.match(openAiShape(refused.body, 'refused').message, /n: must be between 1 and 8/);
      assert.doesNotMatch(openAiShape(refused.body, 'refused').message, /foo/);
    });
  });
});

describe('the two wire mappers, for the errors no request reaches', () => {
  const cases = [
    new ConfigError(['MEDIAPLANE_PORT: must be an integer']),
    new TuningError(TINY, ['TENSOR_PARALLEL_SIZE: must divide 4']),
    new StateFileError('/data/orchestrator-secret is empty or unreadable'),
    new EmbeddedDbLockedError(123, '/data/db'),
    new InternalError('a path: /secret/place'),
    new Error('a bug, with a path: /secret/place'),
  ];
  it('the server-side ones are a 500 that says nothing of the cause', () => {
    for (const err of cases) {
      const tasks = tasksWireError(err);
      const openai = openAiWireError(err);
      if (err instanceof EmbeddedDbLockedError) {
        assert.equal(tasks.status, 503);
        continue;
      }
      assert.equal(tasks.status, 500, err.name);
      assert.deepEqual(tasks.body, { errors: ['internal server error'] });
      assert.equal(openai.status, 500);
      assert.deepEqual(openai.body, {
        error: { message: 'internal server error', type: 'server_error', param: null, code: 'internal' },
      });
    }
  });

  it('the family: code, status and retryable say what they are', () => {
    assert.equal(new ConfigError([]).code, 'invalid_config');
    assert.equal(new UsageError('x').statusCode, 400);
    assert.equal(new UpstreamUnavailableError('x').retryable, true);
    assert.equal(new PromptTooLongError(5000, 4096).retryable, false);
  });

  it("a prompt too long is the caller's context_length_exceeded about `messages`", () => {
    const e = openAiWireError(new PromptTooLongError(5000, 4096));
    assert.equal(e.status, 400);
    assert.equal(e.body.error.code, 'context_length_exceeded');
    assert.equal(e.body.error.param, 'messages');
    assert.ok(new PromptTooLongError(1, 1) instanceof ContextLengthExceededError);
  });

  it('each dialect keeps its rules: 409 is a 400 on the task API, validation a 400 on the LLM API', () => {
    assert.deepEqual(tasksWireError(new CancelledError()), { status: 400, body: { errors: ['cancelled'] } });
    const v = new ValidationError(['a: must be a string', 'b: is required'], { param: 'a' });
    assert.equal(tasksWireError(v).status, 422);
    assert.deepEqual(tasksWireError(v).body, { errors: ['a: must be a string', 'b: is required'] });
    assert.deepEqual(openAiWireError(v), {
      status: 400,
      body: {
        error: {
          message: 'a: must be a string; b: is required',
          type: 'invalid_request_error',
          param: 'a',
          code: 'invalid_request',
        },
      },
    });
  });

  it("upstream failures keep their status and type; an orchestrator's caller mistakes are 400s", () => {
    assert.equal(openAiWireError(new UpstreamUnavailableError('busy')).body.error.type, 'service_unavailable');
    assert.equal(openAiWireError(new UpstreamFailedError('broke')).body.error.type, 'upstream_error');
    assert.equal(openAiWireError(new TimeoutError('slow')).body.error.type, 'timeout_error');
    const tooLarge = { code: 'FST_ERR_CTP_BODY_TOO_LARGE', statusCode: 413, message: 'too large' };
    assert.equal(openAiWireError(tooLarge).status, 413);
    assert.equal(openAiWireError(tooLarge, { callerMistakesAs400: true }).status, 400);
    const missing = new ModelNotFoundError('model x/y is not served here');
    assert.equal(openAiWireError(missing, { callerMistakesAs400: true }).status, 404);
  });

  it("Fastify's own errors become the family's, by their code", () => {
    const by = (code: string, statusCode: number) => fromFastifyError({ code, statusCode, message: 'm' });
    assert.equal(by('FST_ERR_CTP_INVALID_MEDIA_TYPE', 415).code, 'unsupported_media_type');
    assert.equal(by('FST_ERR_CTP_EMPTY_JSON_BODY', 400).code, 'bad_request');
    assert.equal(by('FST_ERR_CTP_INVALID_CONTENT_LENGTH', 400).statusCode, 400);
    assert.equal(by('FST_ERR_SOMETHING_NEW', 405).statusCode, 400);
    assert.equal(by('FST_ERR_SOMETHING_ELSE', 500).statusCode, 500);
  });
});
