import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { guardedLookup, hostNotAllowed, hostProblem, privateAddressError, type Resolve } from '../lib/net-guard.ts';

// One webhook POST (issue #18): a bounded time for the whole exchange, no redirect followed
// (a 3xx is the answer), the first KB of the answer kept, and the same address guard as
// task inputs, checked before the request and again by the socket's own DNS lookup, so a
// name that answers a public address first and a private one at connect time (DNS
// rebinding, issue #15) is refused where it would connect.

/** How much of an answer the delivery log keeps (Livepeer keeps the first 1024 characters). */
export const RESPONSE_KEPT_BYTES = 1024;

/**
 * How much of the status line's reason the log keeps: Node reads one of up to 16 KB, and a
 * receiver's 15,000 characters were stored as they came (issue #25). Standard reasons are
 * under 40 characters.
 */
export const STATUS_TEXT_KEPT_CHARS = 128;

export interface PostOptions {
  url: string;
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
  allowPrivate: boolean;
  resolve?: Resolve | undefined;
  /** Aborts the request (shutdown); the result then says so. */
  signal?: AbortSignal | undefined;
  agents?: { http: http.Agent; https: https.Agent } | undefined;
}

export interface PostResult {
  statusCode: number | null;
  statusText: string | null;
  /** The first KB of the answer, as text. */
  responseBody: string | null;
  /** Why no answer came; null when one did. */
  error: string | null;
  /** Trying again cannot help: the URL is no http(s) URL, or its address is not allowed. */
  permanent: boolean;
  /** The request was aborted through `signal`, not by a fault of the receiver. */
  aborted: boolean;
  /** No answer came within the timeout: the receiver held the request (issue #25 counts these). */
  timedOut: boolean;
  durationMs: number;
}

class DeliveryTimeout extends Error {
  constructor(ms: number) {
    super(`no answer within ${ms} ms`);
  }
}

function withinTime<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeliveryTimeout(ms)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** PostgreSQL text holds no NUL; what a receiver answers is kept otherwise as it came. */
const storable = (text: string): string => text.replaceAll('\u0000', '\uFFFD');

export async function postWebhook(o: PostOptions): Promise<PostResult> {
  const started = performance.now();
  const result = (r: Partial<PostResult>): PostResult => ({
    statusCode: null,
    statusText: null,
    responseBody: null,
    error: null,
    permanent: false,
    aborted: false,
    timedOut: false,
    ...r,
    durationMs: performance.now() - started,
  });
  let url: URL;
  try {
    url = new URL(o.url);
  } catch {
    return result({ error: 'the webhook URL is not a valid URL', permanent: true });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return result({ error: `the webhook URL has an unsupported scheme ${url.protocol}`, permanent: true });
  try {
    // The timeout covers the whole attempt, the name's resolution included: the claim's
    // lease is the timeout and a margin, and a send that outlives it may go out twice.
    const problem = await withinTime(
      hostProblem(url, { allowPrivate: o.allowPrivate, resolve: o.resolve }),
      o.timeoutMs,
    );
    if (problem) return result({ error: hostNotAllowed(url, problem), permanent: true });
    const answer = await exchange(url, o, Math.max(1, o.timeoutMs - (performance.now() - started)));
    return result(answer);
  } catch (err) {
    const refused = privateAddressError(err);
    if (refused) return result({ error: hostNotAllowed(url, refused.problem), permanent: true });
    if (o.signal?.aborted)
      return result({ error: 'abandoned: the service stopped before an answer came', aborted: true });
    return result({ error: storable(errorText(err)), timedOut: err instanceof DeliveryTimeout });
  }
}

function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as NodeJS.ErrnoException).code;
  return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
}

/** The POST itself: resolves with the status and the first KB once that much (or all) came. */
function exchange(
  url: URL,
  o: PostOptions,
  remainingMs: number,
): Promise<Pick<PostResult, 'statusCode' | 'statusText' | 'responseBody'>> {
  const secure = url.protocol === 'https:';
  const mod = secure ? https : http;
  const agent = o.agents ? (secure ? o.agents.https : o.agents.http) : undefined;
  return new Promise((resolve, reject) => {
    const req = mod.request(url, {
      method: 'POST',
      headers: { ...o.headers, 'content-length': String(Buffer.byteLength(o.body)) },
      ...(o.allowPrivate ? {} : { lookup: guardedLookup(o.resolve) }),
      ...(agent ? { agent } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
    });
    const timer = setTimeout(() => req.destroy(new DeliveryTimeout(o.timeoutMs)), remainingMs);
    const finish = (err: Error | null, value?: Pick<PostResult, 'statusCode' | 'statusText' | 'responseBody'>) => {
      clearTimeout(timer);
      if (err) reject(err);
      else if (value) resolve(value);
    };
    req.on('error', (err) => finish(err));
    req.on('response', (res) => readHead(res, (value) => finish(null, value)));
    req.end(o.body);
  });
}

/**
 * Keeps the first KB of the answer. A longer one is cut there (the socket is closed, not
 * read to its end); an answer whose body breaks off still counts by its status.
 */
function readHead(
  res: IncomingMessage,
  done: (v: Pick<PostResult, 'statusCode' | 'statusText' | 'responseBody'>) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let finished = false;
  const end = () => {
    if (finished) return;
    finished = true;
    const head = Buffer.concat(chunks).subarray(0, RESPONSE_KEPT_BYTES);
    done({
      statusCode: res.statusCode ?? null,
      statusText: res.statusMessage
        ? storable(res.statusMessage.slice(0, STATUS_TEXT_KEPT_CHARS))
        : (http.STATUS_CODES[res.statusCode ?? 0] ?? null),
      responseBody: storable(new TextDecoder().decode(head)),
    });
  };
  res.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= RESPONSE_KEPT_BYTES) {
      end();
      res.destroy();
    }
  });
  res.on('end', end);
  res.on('error', end);
  res.on('close', end);
}
