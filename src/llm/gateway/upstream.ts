// HTTP to orchestrators with node:http and keep-alive sockets: fewer layers per chunk than
// fetch's web streams, which matters when every token is one SSE event on the hot path. Chat
// and embeddings are asked through the same POST here; what comes back is read by the shared
// OpenAI-wire reader (llm/openai-wire, issue #26).

import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { type SseBatch, SseBatcher } from '../../lib/sse.ts';
import { type ErrorBody, readErrorBody } from '../openai-wire/index.ts';
import { REQUEST_ID_HEADER } from '../protocol/index.ts';

const agents = {
  'http:': new http.Agent({ keepAlive: true, maxSockets: 1024 }),
  'https:': new https.Agent({ keepAlive: true, maxSockets: 1024 }),
};

function request(
  url: string,
  opts: { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal },
): Promise<IncomingMessage> {
  const u = new URL(url);
  const lib = u.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = lib.request(
      u,
      {
        method: opts.method,
        headers: opts.headers,
        agent: agents[u.protocol === 'https:' ? 'https:' : 'http:'],
        signal: opts.signal,
      },
      resolve,
    );
    req.once('error', reject);
    req.end(opts.body);
  });
}

function authHeaders(secret: string | undefined): Record<string, string> {
  return secret ? { authorization: `Bearer ${secret}` } : {};
}

async function readText(res: IncomingMessage): Promise<string> {
  let text = '';
  res.setEncoding('utf8');
  for await (const c of res) text += c as string;
  return text;
}

export async function getJson<T>(url: string, opts: { secret?: string | undefined; timeoutMs: number }): Promise<T> {
  const res = await request(url, {
    method: 'GET',
    headers: authHeaders(opts.secret),
    signal: AbortSignal.timeout(opts.timeoutMs),
  });
  const text = await readText(res);
  if (res.statusCode !== 200) throw new Error(`${url} answered ${res.statusCode}`);
  return JSON.parse(text) as T;
}

/**
 * An answer's SSE batches, read with plain 'data' events: per network read this costs one
 * callback and one promise, where an async iterator over the response stacks stream, iterator
 * and generator machinery on every token's chunk. A reader that falls behind (a slow client)
 * pauses the socket, so TCP backpressure reaches the orchestrator.
 */
export class SseReader {
  static readonly #MAX_QUEUED = 16;
  readonly #res: IncomingMessage;
  readonly #queue: SseBatch[] = [];
  #wake: (() => void) | undefined;
  #ended = false;
  #error: Error | undefined;

  constructor(res: IncomingMessage) {
    this.#res = res;
    const batcher = new SseBatcher();
    res.on('data', (chunk: Buffer) => {
      const batch = batcher.push(chunk);
      if (!batch) return;
      this.#queue.push(batch);
      if (this.#queue.length >= SseReader.#MAX_QUEUED) res.pause();
      this.#notify();
    });
    res.once('end', () => {
      this.#ended = true;
      this.#notify();
    });
    res.on('error', (err) => this.#fail(err));
    res.once('close', () => {
      if (!this.#ended) this.#fail(new Error('the connection closed before the answer ended'));
    });
  }

  /** The next batch, or undefined at the answer's end; throws if the connection broke. */
  async next(): Promise<SseBatch | undefined> {
    for (;;) {
      const batch = this.#queue.shift();
      if (batch) {
        if (this.#res.isPaused() && this.#queue.length < SseReader.#MAX_QUEUED / 2) this.#res.resume();
        return batch;
      }
      if (this.#error) throw this.#error;
      if (this.#ended) return undefined;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }

  #fail(err: Error): void {
    this.#error ??= err;
    this.#notify();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

export type Opened = { ok: true; events: SseReader } | ({ ok: false } & ErrorBody);

interface PostOptions {
  secret?: string | undefined;
  requestId: string;
  signal: AbortSignal;
}

function post(url: string, body: string, o: PostOptions & { accept: string }): Promise<IncomingMessage> {
  return request(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: o.accept,
      [REQUEST_ID_HEADER]: o.requestId,
      ...authHeaders(o.secret),
    },
    body,
    signal: o.signal,
  });
}

/** The error answer of a response that is not the one asked for (a 200 of another type: 502). */
async function refused(res: IncomingMessage, maxChars: number): Promise<{ ok: false } & ErrorBody> {
  const status = res.statusCode ?? 0;
  const text = await readText(res).catch(() => '');
  return { ok: false, ...readErrorBody(status === 200 ? 502 : status, text, { maxChars }) };
}

/** Asks `base` for a chat completion, always streamed (API.md section B): its events, or its error. */
export async function openCompletion(base: string, body: string, opts: PostOptions): Promise<Opened> {
  const res = await post(`${base}/v1/chat/completions`, body, { ...opts, accept: 'text/event-stream' });
  if (res.statusCode === 200 && String(res.headers['content-type']).startsWith('text/event-stream'))
    return { ok: true, events: new SseReader(res) };
  return refused(res, 500);
}

/** POSTs `body` to `url` for a JSON answer (embeddings): its text, or its error. */
export async function postForJson(
  url: string,
  body: string,
  opts: PostOptions,
): Promise<{ ok: true; text: string } | ({ ok: false } & ErrorBody)> {
  const res = await post(url, body, { ...opts, accept: 'application/json' });
  if (res.statusCode !== 200) return refused(res, 300);
  return { ok: true, text: await readText(res) };
}
