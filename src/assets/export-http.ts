import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import { StorageDeniedError, TimeoutError, UpstreamUnavailableError, type MediaplaneError } from '../lib/errors.ts';
import { guardedLookup, hostNotAllowed, hostProblem, privateAddressError, type Resolve } from '../lib/net-guard.ts';

// An asset's file sent to a URL of its owner's (issue #28, Livepeer's `custom` export: one PUT
// or POST of the whole file). The rules of webhooks/send.ts: the address guard of task inputs,
// checked before the request and again by the socket's own DNS lookup (DNS rebinding), and no
// redirect followed: a 3xx is the answer, and a failure. The file is streamed from the store
// with its Content-Length (what presigned S3 PUTs need), never held in memory.
//
// The headers are the owner's secrets (an Authorization, a signature): nothing here logs them
// or puts them in a message. Messages name the URL without its query and fragment (where a
// presigned URL keeps its signature) and say what a user can act on. Retryable only where
// trying again can help: the network, a 5xx, a 429; never a 4xx or a refused address.

/** Headers the request itself sets: a caller's own would break the framing or the target. */
export const RESERVED_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'proxy-authorization',
  'proxy-connection',
]);

export interface SendFileOptions {
  url: string;
  method: 'PUT' | 'POST';
  /** The owner's headers: secrets, never logged, never in an error. */
  headers: Readonly<Record<string, string>>;
  body: Readable;
  size: number;
  /** Sent unless the owner's headers name a Content-Type. */
  contentType: string;
  allowPrivate: boolean;
  /** The longest the whole exchange may take, and the longest it may go with no byte either way. */
  timeoutMs: number;
  idleTimeoutMs: number;
  signal: AbortSignal;
  /** How host names resolve (a seam for tests); the system resolver when absent. */
  resolve?: Resolve | undefined;
  /** Bytes of the file sent so far. */
  onBytes?: (sent: number) => void;
}

/** `https://host/path`: the URL as messages show it, without credentials, query and fragment. */
export function shownUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

class ExportTimeout extends Error {}
class SourceReadError extends Error {}

interface Answer {
  status: number;
  statusText: string;
  location: string | undefined;
}

/** Sends the file; resolves once the receiver accepted it (2xx), else throws a MediaplaneError. */
export async function sendFile(o: SendFileOptions): Promise<{ status: number }> {
  const url = new URL(o.url);
  const where = `export to ${shownUrl(url)}`;
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new StorageDeniedError(`${where}: only http:// and https:// URLs can be exported to`);
  const problem = await hostProblem(url, { allowPrivate: o.allowPrivate, resolve: o.resolve });
  if (problem) throw new StorageDeniedError(`${where}: ${hostNotAllowed(url, problem)}`);
  let answer: Answer;
  try {
    answer = await exchange(url, o);
  } catch (err) {
    if (o.signal.aborted) throw o.signal.reason;
    throw networkError(where, url, err);
  }
  return { status: judge(where, answer) };
}

/** A 2xx is done; a 3xx is not followed; 429 and 5xx may pass; any other answer will not. */
function judge(where: string, a: Answer): number {
  const said = `${where}: the server answered ${a.status}${a.statusText ? ` ${a.statusText}` : ''}`;
  if (a.status >= 200 && a.status < 300) return a.status;
  if (a.status >= 300 && a.status < 400) {
    const to = redirectTarget(a.location, where);
    throw new StorageDeniedError(
      `${said}, a redirect${to ? ` to ${to}` : ''}: redirects are not followed; export to the final URL`,
    );
  }
  if (a.status === 429 || a.status >= 500) throw new UpstreamUnavailableError(said);
  throw new StorageDeniedError(said);
}

function redirectTarget(location: string | undefined, where: string): string | undefined {
  if (!location) return undefined;
  try {
    return shownUrl(new URL(location, where.replace(/^export to /, '')));
  } catch {
    return undefined;
  }
}

/** Words for a request that got no answer; retryable unless the address or TLS was refused. */
function networkError(where: string, url: URL, err: unknown): MediaplaneError {
  const refused = privateAddressError(err);
  if (refused) return new StorageDeniedError(`${where}: ${hostNotAllowed(url, refused.problem)}`);
  if (err instanceof ExportTimeout) return new TimeoutError(`${where}: ${err.message}`);
  if (err instanceof SourceReadError)
    return new UpstreamUnavailableError(`${where}: reading the asset's file from the store failed: ${err.message}`);
  const code = (err as NodeJS.ErrnoException).code ?? '';
  const text = err instanceof Error ? err.message : String(err);
  const words: Record<string, string> = {
    ECONNREFUSED: 'connection refused',
    ECONNRESET: 'the server closed the connection before it answered',
    EPIPE: 'the server closed the connection before it answered',
    ENOTFOUND: `the host name ${url.hostname} does not resolve`,
    EAI_AGAIN: `the host name ${url.hostname} could not be resolved (a DNS failure)`,
    ETIMEDOUT: 'the connection timed out',
    EHOSTUNREACH: 'the host is unreachable',
    ENETUNREACH: 'the network is unreachable',
  };
  const said = words[code];
  if (said) return new UpstreamUnavailableError(`${where}: ${said}`, { cause: err });
  // A certificate the client refuses stays refused on the next try.
  if (/CERT|SSL|TLS|self[- ]signed|certificate/i.test(`${code} ${text}`))
    return new StorageDeniedError(`${where}: the server's TLS certificate was refused (${code || text})`);
  return new UpstreamUnavailableError(`${where}: ${code ? `${code}: ` : ''}${text}`, { cause: err });
}

/** Owner's headers with the reserved ones dropped (the API refuses them already), and ours. */
function requestHeaders(o: SendFileOptions): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(o.headers)) if (!RESERVED_HEADERS.has(k.toLowerCase())) out[k] = v;
  if (!Object.keys(out).some((k) => k.toLowerCase() === 'content-type')) out['content-type'] = o.contentType;
  out['content-length'] = String(o.size);
  return out;
}

const isOk = (status: number): boolean => status >= 200 && status < 300;

/**
 * The request: the file piped in, the answer once it came. A 2xx counts once the whole file
 * went (a receiver that says OK before that did not get it all); any other answer ends the
 * upload at once. Every way the request ends settles it: an answer, an error, or the
 * connection closing (after an answer, Node may close it without another event).
 */
function exchange(url: URL, o: SendFileOptions): Promise<Answer> {
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(url, {
      method: o.method,
      headers: requestHeaders(o),
      // A connection of its own: a kept-alive socket may be one the server already closed.
      agent: false,
      ...(o.allowPrivate ? {} : { lookup: guardedLookup(o.resolve) }),
      signal: o.signal,
    });
    let settled = false;
    let sent = 0;
    let answer: Answer | undefined;
    const total = setTimeout(
      () => req.destroy(new ExportTimeout(`no answer within ${o.timeoutMs / 1000} s`)),
      o.timeoutMs,
    );
    const settle = (result: { answer: Answer } | { error: unknown }) => {
      if (settled) return;
      settled = true;
      clearTimeout(total);
      o.body.unpipe(req);
      o.body.destroy();
      if ('answer' in result) resolve(result.answer);
      else reject(result.error);
    };
    /** Settles with the answer when it is final; false while there is none yet, or a 2xx came early. */
    const answered = (): boolean => {
      if (!answer || (isOk(answer.status) && sent < o.size)) return false;
      settle({ answer });
      return true;
    };
    req.setTimeout(o.idleTimeoutMs, () =>
      req.destroy(new ExportTimeout(`nothing moved for ${o.idleTimeoutMs / 1000} s`)),
    );
    req.on('response', (res: IncomingMessage) => {
      answer = { status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', location: res.headers.location };
      res.resume();
      if (!isOk(answer.status)) {
        settle({ answer });
        req.destroy();
        return;
      }
      if (!answered()) res.on('end', answered);
    });
    req.on('finish', answered);
    req.on('error', (error) => answered() || settle({ error }));
    req.on('close', () => answered() || settle({ error: Object.assign(new Error('closed'), { code: 'ECONNRESET' }) }));
    o.body.on('data', (chunk: Buffer) => {
      sent += chunk.length;
      o.onBytes?.(sent);
    });
    o.body.on('error', (err) => req.destroy(new SourceReadError(err.message)));
    o.body.pipe(req);
  });
}
