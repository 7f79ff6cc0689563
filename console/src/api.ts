// The console's one way to the API: the public routes, with the key the person signed in
// with (sessionStorage: a reload keeps it, closing the tab forgets it). Errors carry the
// API's own words: `{errors: [...]}` from /api, `{error: {message}}` from the LLM routes.

import { readSse, type SseEvent } from './sse.ts';

export type { SseEvent } from './sse.ts';

const KEY = 'mediaplane.apiKey';

/** An answer that is not 2xx, or no answer at all (status 0). */
export class ApiError extends Error {
  /** The HTTP status; 0 when the service did not answer. */
  readonly status: number;
  /** The API's own words. */
  readonly messages: string[];
  constructor(status: number, messages: string[]) {
    super(messages.join('; ') || `HTTP ${status}`);
    this.name = 'ApiError';
    this.status = status;
    this.messages = messages;
  }
}

export function apiKey(): string | null {
  return sessionStorage.getItem(KEY);
}

export function setApiKey(key: string | null): void {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

function headers(body: unknown): Record<string, string> {
  const h: Record<string, string> = {};
  const key = apiKey();
  if (key) h.authorization = `Bearer ${key}`;
  if (body !== undefined) h['content-type'] = 'application/json';
  return h;
}

/** The messages of an error body, whichever API's shape it has. */
export function errorWords(body: unknown): string[] {
  if (typeof body !== 'object' || body === null) return [];
  const b = body as { errors?: unknown; error?: unknown; message?: unknown };
  if (Array.isArray(b.errors)) return b.errors.map(String);
  if (typeof b.error === 'object' && b.error !== null) {
    const m = (b.error as { message?: unknown }).message;
    if (typeof m === 'string') return [m];
  }
  if (typeof b.error === 'string') return [b.error];
  if (typeof b.message === 'string') return [b.message];
  return [];
}

async function send(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
  let res: Response;
  try {
    const init: RequestInit = { method, headers: headers(body) };
    if (body !== undefined) init.body = JSON.stringify(body);
    if (signal) init.signal = signal;
    res = await fetch(path, init);
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new ApiError(0, [`the service did not answer (${(e as Error).message})`]);
  }
  if (res.ok) return res;
  const text = await res.text();
  let words: string[] = [];
  try {
    words = errorWords(JSON.parse(text));
  } catch {
    if (text.trim()) words = [text.trim().slice(0, 500)];
  }
  throw new ApiError(res.status, words.length ? words : [`${res.status} ${res.statusText}`]);
}

/** One JSON call; 204 and empty answers resolve to undefined. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await send(method, path, body);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Like api(), with the answer's headers (a Link header for paging, a cost header). */
export async function apiRaw(
  method: string,
  path: string,
  opts: { body?: unknown; signal?: AbortSignal } = {},
): Promise<Response> {
  return send(method, path, opts.body, opts.signal);
}

/**
 * An event stream (GET /api/task/{id}/events, or POST /v1/chat/completions with stream: true)
 * read with the key; resolves when the server closes it, rejects with an ApiError when the
 * answer is not 2xx. Stop it with `signal`.
 */
export async function sse(
  path: string,
  onEvent: (e: SseEvent) => void,
  opts: { method?: string; body?: unknown; signal?: AbortSignal } = {},
): Promise<void> {
  try {
    const res = await send(opts.method ?? 'GET', path, opts.body, opts.signal);
    if (res.body) await readSse(res.body, onEvent);
  } catch (e) {
    if ((e as Error).name === 'AbortError') return;
    throw e;
  }
}

/** The URL of the next page from a Link header (`<url>; rel="next"`), if any. */
export function nextLink(res: Response): string | undefined {
  const link = res.headers.get('link') ?? '';
  return /<([^>]+)>\s*;\s*rel="?next"?/.exec(link)?.[1];
}
