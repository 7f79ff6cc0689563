// HTTP to orchestrators with node:http and keep-alive sockets: fewer layers per chunk than
// fetch's web streams, which matters when every token is one SSE event on the hot path.

import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { type SseBatch, SseBatcher } from '../../lib/sse.ts';
import { REQUEST_ID_HEADER, type FinishReason, type TokenLogprob, type Usage } from '../protocol.ts';

/** A piece of tool call `index` of a choice, as OpenAI streams them: id, type and name on the first only. */
export interface ToolCallDelta {
  index?: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
}

/** One choice of a chunk (API.md section B, the orchestrator -> gateway wire). */
export interface ChunkChoice {
  index?: number;
  delta?: { role?: string; content?: string | null; tool_calls?: ToolCallDelta[] | null };
  logprobs?: { content?: TokenLogprob[] | null } | null;
  finish_reason?: FinishReason | null;
}

/** The parts of an orchestrator's `data:` chunk the gateway reads (the rest passes through). */
export interface CompletionChunk {
  id?: string;
  model?: string;
  choices?: ChunkChoice[];
  usage?: Usage | null;
  created?: number;
}

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

export type Opened =
  | { ok: true; events: SseReader }
  | { ok: false; status: number; message: string; code?: string | undefined; param?: string | undefined };

export async function openCompletion(
  base: string,
  body: string,
  opts: { secret?: string | undefined; requestId: string; signal: AbortSignal },
): Promise<Opened> {
  const res = await request(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      [REQUEST_ID_HEADER]: opts.requestId,
      ...authHeaders(opts.secret),
    },
    body,
    signal: opts.signal,
  });
  const status = res.statusCode ?? 0;
  if (status === 200 && String(res.headers['content-type']).startsWith('text/event-stream')) {
    return { ok: true, events: new SseReader(res) };
  }
  const text = await readText(res).catch(() => '');
  let message = text.slice(0, 500) || `status ${status}`;
  let code: string | undefined;
  let param: string | undefined;
  try {
    const j = JSON.parse(text) as { error?: { message?: unknown; code?: unknown; param?: unknown } };
    if (typeof j.error?.message === 'string') message = j.error.message;
    if (typeof j.error?.code === 'string') code = j.error.code;
    if (typeof j.error?.param === 'string') param = j.error.param;
  } catch {
    // not JSON: keep the text
  }
  return { ok: false, status: status === 200 ? 502 : status, message, code, param };
}
