// The HTTP server's own limits (issue #15): a slow client cannot hold a socket past
// MEDIAPLANE_REQUEST_TIMEOUT_MS, a streamed answer longer than that is not cut, errors that
// Node's parser raises come in the API's own shape, and links never echo the Host header.

import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startOrchestrator } from '../../src/llm/orchestrator/index.ts';
import { MODELS_DIR, quietLog, readSse, testConfig, TINY } from '../helpers/llm.ts';
import { startTestServer, transcodeBody, type TestServer } from '../helpers/server.ts';
import { orchestratorOptions } from '../../src/main.ts';

const TIMEOUT_MS = 400;

interface RawAnswer {
  text: string;
  /** ms from the first byte sent until the server closed the socket. */
  closedAfterMs: number;
}

/** Opens a socket, sends `head`, then drips `drip` one byte every `everyMs` until the server closes it. */
function rawRequest(
  url: string,
  head: string,
  opts: { drip?: string; everyMs?: number; end?: boolean; giveUpMs?: number } = {},
): Promise<RawAnswer> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let text = '';
    let timer: NodeJS.Timeout | undefined;
    const socket = net.connect(Number(port), '127.0.0.1', () => {
      socket.write(head);
      if (opts.end) socket.end();
      let i = 0;
      if (opts.drip)
        timer = setInterval(
          () => socket.writable && socket.write(opts.drip?.[i++ % (opts.drip?.length ?? 1)] ?? ' '),
          opts.everyMs ?? 50,
        );
    });
    const giveUp = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the socket open for ${opts.giveUpMs ?? 10_000} ms`));
    }, opts.giveUpMs ?? 10_000);
    socket.on('data', (d) => (text += d.toString('utf8')));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve({ text, closedAfterMs: performance.now() - started });
    });
  });
}

/** The 408 body of the LLM routes and of a standalone orchestrator. */
const OPENAI_TIMEOUT = {
  error: {
    message: `the request did not arrive in full within ${TIMEOUT_MS} ms`,
    type: 'timeout_error',
    param: null,
    code: 'request_timeout',
  },
};

function jsonBodyOf(raw: string): unknown {
  return JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4));
}

describe('HTTP server limits', () => {
  let server: TestServer;
  let key: string;

  before(async () => {
    server = await startTestServer({
      roles: { api: true, worker: false, gateway: true, orchestrator: true },
      settings: {
        requestTimeoutMs: TIMEOUT_MS,
        modelsDir: MODELS_DIR,
        orchestratorModels: [TINY],
        gatewayPollMs: 60_000,
      },
    });
    key = await server.key('alice');
  });
  after(() => server.stop());

  it('answers 408 in the task API shape and closes a request whose body trickles in, for every such connection', async () => {
    const head = `POST /api/transcode HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`;
    const answers = await Promise.all(
      Array.from({ length: 30 }, () => rawRequest(server.url, head, { drip: '{"input": ', everyMs: 50 })),
    );
    for (const a of answers) {
      assert.match(a.text, /^HTTP\/1\.1 408 /);
      assert.deepEqual(jsonBodyOf(a.text), { errors: [`the request did not arrive in full within ${TIMEOUT_MS} ms`] });
      // The sweep runs at a tenth of the timeout; the rest is this 2-core host's scheduling.
      assert.ok(a.closedAfterMs < TIMEOUT_MS * 5, `closed after ${a.closedAfterMs} ms`);
    }
  });

  it('closes a connection whose headers trickle in', async () => {
    const a = await rawRequest(server.url, 'GET /api/task HTTP/1.1\r\n', { drip: 'X-Slow: a\r\n', everyMs: 50 });
    assert.match(a.text, /^HTTP\/1\.1 408 /);
    assert.ok(a.closedAfterMs < TIMEOUT_MS * 5, `closed after ${a.closedAfterMs} ms`);
  });

  it('answers in the LLM shape when the slow request was for the LLM routes', async () => {
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`;
    const a = await rawRequest(server.url, head, { drip: '{"model": ', everyMs: 50 });
    assert.match(a.text, /^HTTP\/1\.1 408 /);
    assert.deepEqual(jsonBodyOf(a.text), OPENAI_TIMEOUT);
  });

  it('does not cut a streamed answer that lasts longer than the request timeout', async () => {
    const started = performance.now();
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: TINY,
        messages: [{ role: 'user', content: 'Hello' }],
        max_tokens: 1500,
        seed: 1,
        stream: true,
      }),
    });
    assert.equal(res.status, 200);
    const events = await readSse(res);
    const elapsed = performance.now() - started;
    assert.ok(
      elapsed > TIMEOUT_MS,
      `the stream took ${elapsed} ms, not longer than the timeout: the test proves nothing`,
    );
    assert.equal(events.at(-1)?.data, '[DONE]');
  });

  it('answers a body longer than its Content-Length in the task API shape', async () => {
    const body = JSON.stringify({ input: { url: 'https://example.com/a.mp4' } });
    const head = `POST /api/transcode HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n${body}`;
    const a = await rawRequest(server.url, head);
    assert.match(a.text, /^HTTP\/1\.1 400 /);
    assert.deepEqual(jsonBodyOf(a.text), {
      errors: ['the request is not valid HTTP (does Content-Length match the body?)'],
    });
  });

  it('answers a body shorter than its Content-Length in the task API shape', async () => {
    const body = JSON.stringify({ input: { url: 'https://example.com/a.mp4' } });
    const head = `POST /api/transcode HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length + 50}\r\n\r\n${body}`;
    const a = await rawRequest(server.url, head, { end: true });
    assert.match(a.text, /^HTTP\/1\.1 400 /);
    assert.ok(Array.isArray((jsonBodyOf(a.text) as { errors?: unknown }).errors), a.text);
  });

  it('never builds a link from the Host header', async () => {
    for (let i = 0; i < 3; i++)
      assert.equal((await server.call('POST', '/api/transcode', { key, body: transcodeBody() })).status, 200);
    const a = await rawRequest(
      server.url,
      `GET /api/task?limit=1 HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`,
    );
    const link = /\r\nlink: ([^\r]*)/i.exec(a.text)?.[1];
    assert.ok(link, a.text);
    assert.doesNotMatch(link, /evil/);
    assert.match(link, /^<\/api\/task\?limit=1&cursor=[0-9a-f-]{36}>; rel="next"$/);
  });
});

describe('links under MEDIAPLANE_PUBLIC_URL', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({
      roles: { api: true, worker: false },
      settings: { publicUrl: 'https://media.example.com/' },
    });
  });
  after(() => server.stop());

  it('starts the Link header with the configured base URL', async () => {
    const key = await server.key('bob');
    for (let i = 0; i < 2; i++)
      assert.equal((await server.call('POST', '/api/transcode', { key, body: transcodeBody() })).status, 200);
    const res = await server.call('GET', '/api/task?limit=1', { key, headers: { 'x-forwarded-host': 'evil.example' } });
    assert.match(
      res.headers.get('link') ?? '',
      /^<https:\/\/media\.example\.com\/api\/task\?limit=1&cursor=[0-9a-f-]{36}>; rel="next"$/,
    );
  });
});

describe('a standalone orchestrator', () => {
  it('closes a slow request with 408 in the OpenAI shape', async () => {
    const orch = await startOrchestrator({
      options: orchestratorOptions(
        testConfig({ host: '127.0.0.1', port: 0, requestTimeoutMs: TIMEOUT_MS, orchestratorModels: [] }),
      ),
      log: quietLog,
    });
    try {
      const head =
        'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n';
      const a = await rawRequest(orch.url ?? '', head, { drip: '{"model": ', everyMs: 50 });
      assert.match(a.text, /^HTTP\/1\.1 408 /);
      assert.deepEqual(jsonBodyOf(a.text), OPENAI_TIMEOUT);
    } finally {
      await orch.close();
    }
  });
});
