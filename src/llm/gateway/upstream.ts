// HTTP to orchestrators with node:http and keep-alive sockets: fewer layers per chunk than
// fetch's web streams, which matters when every token is one SSE event on the hot path.

import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { parseSseBatches, type SseEvent } from '../../lib/sse.ts';
import { REQUEST_ID_HEADER } from '../protocol.ts';

const agents = { 'http:': new http.Agent({ keepAlive: true, maxSockets: 1024 }), 'https:': new https.Agent({ keepAlive: true, maxSockets: 1024 }) };

function request(url: string, opts: { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal }): Promise<IncomingMessage> {
  const u = new URL(url);
  const lib = u.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = lib.request(u, { method: opts.method, headers: opts.headers, agent: agents[u.protocol === 'https:' ? 'https:' : 'http:'], signal: opts.signal }, resolve);
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
  const res = await request(url, { method: 'GET', headers: authHeaders(opts.secret), signal: AbortSignal.timeout(opts.timeoutMs) });
  const text = await readText(res);
  if (res.statusCode !== 200) throw new Error(`${url} answered ${res.statusCode}`);
  return JSON.parse(text) as T;
}

export type Opened =
  | { ok: true; events: AsyncIterator<SseEvent[]> }
  | { ok: false; status: number; message: string; code?: string | undefined };

/**
 * POSTs a chat request and returns its SSE events, batched as they arrived (one batch per
 * network read, so the relay writes them on with one write), or the orchestrator's error answer.
 */
export async function openCompletion(base: string, body: string, opts: { secret?: string | undefined; requestId: string; signal: AbortSignal }): Promise<Opened> {
  const res = await request(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', [REQUEST_ID_HEADER]: opts.requestId, ...authHeaders(opts.secret) },
    body,
    signal: opts.signal,
  });
  const status = res.statusCode ?? 0;
  if (status === 200 && String(res.headers['content-type']).startsWith('text/event-stream')) {
    return { ok: true, events: parseSseBatches(res)[Symbol.asyncIterator]() };
  }
  const text = await readText(res).catch(() => '');
  let message = text.slice(0, 500) || `status ${status}`;
  let code: string | undefined;
  try {
    const j = JSON.parse(text) as { error?: { message?: unknown; code?: unknown } };
    if (typeof j.error?.message === 'string') message = j.error.message;
    if (typeof j.error?.code === 'string') code = j.error.code;
  } catch {
    // not JSON: keep the text
  }
  return { ok: false, status: status === 200 ? 502 : status, message, code };
}
