import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import {
  assertHostAllowed,
  guardedLookup,
  hostNotAllowed,
  privateAddressError,
  type Resolve,
} from '../lib/net-guard.ts';
import { InputUnreadableError, UpstreamUnavailableError } from '../lib/errors.ts';
import { DownloadGuard, type DownloadLimits } from './download.ts';
import type { FetchedInput, FetchOptions, InputSource } from './types.ts';

export interface HttpInputOptions {
  limits: DownloadLimits;
  maxRedirects: number;
  allowPrivate: boolean;
  /**
   * Runs before every request, redirect hops included, and throws when the URL may not be
   * fetched. Defaults to the private-address guard (lib/net-guard.ts) with `allowPrivate`.
   * A seam for tests: a public first host cannot be faked on a machine without network,
   * so a test injects the allow-decision and checks that each hop is asked.
   */
  checkHost?: (url: URL) => Promise<void>;
  /** How host names are resolved, by the default check and by the socket; a seam for tests (DNS rebinding, issue #15). */
  resolve?: Resolve;
}

/** A URL as it may be shown in logs and messages: no user info, no query (signed URLs carry secrets there). */
export function showUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/** An HTTP(S) input, redirects followed by hand so each hop passes the private-address guard. */
export class HttpInput implements InputSource {
  readonly description: string;
  readonly #url: URL;
  readonly #opts: HttpInputOptions;

  constructor(url: URL, opts: HttpInputOptions) {
    this.#url = url;
    this.#opts = opts;
    this.description = showUrl(url);
  }

  async fetch(opts: FetchOptions): Promise<FetchedInput> {
    const guard = new DownloadGuard(opts.signal, this.#opts.limits);
    let res: IncomingMessage | undefined;
    try {
      res = await this.#follow(guard.signal);
      const declared = res.headers['content-length'] ? Number(res.headers['content-length']) : undefined;
      guard.checkDeclaredSize(declared);
      const size = await guard.toFile(res, opts.dest, (n) => opts.onBytes?.(n, declared));
      return { path: opts.dest, size };
    } catch (err) {
      // A body refused unread (declared too large) would hold its keep-alive socket.
      res?.destroy();
      throw guard.explain(err, `the input ${this.description}`);
    } finally {
      guard.done();
    }
  }

  /** GETs the URL, following up to maxRedirects redirects; answers the first 2xx response. */
  async #follow(signal: AbortSignal): Promise<IncomingMessage> {
    return (await openUrl(this.#url, { ...this.#opts, signal, shown: this.description })).res;
  }
}

/**
 * One guarded GET of `url` with `headers` (a Range, issue #30), redirects followed by hand so
 * each hop passes the private-address guard; answers the first 2xx response and the URL it
 * came from. Shared by HttpInput and the ranged reads of storage/ranges.ts.
 */
export async function openUrl(
  start: URL,
  o: Omit<HttpInputOptions, 'limits'> & { signal: AbortSignal; shown: string; headers?: Record<string, string> },
): Promise<{ res: IncomingMessage; url: URL }> {
  const { allowPrivate, resolve } = o;
  const checkHost = o.checkHost ?? ((u: URL) => assertHostAllowed(u, { allowPrivate, resolve }));
  let url = start;
  for (let hop = 0; ; hop++) {
    await checkHost(url);
    const res = await get(url, { signal: o.signal, allowPrivate, resolve, headers: o.headers });
    const status = res.statusCode ?? 0;
    if (status >= 200 && status < 300) return { res, url };
    res.resume();
    const location = res.headers.location;
    if (status >= 300 && status < 400 && location) {
      if (hop >= o.maxRedirects)
        throw new InputUnreadableError(`the input ${o.shown} redirected more than ${o.maxRedirects} times`);
      url = new URL(location, url);
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        throw new InputUnreadableError(`the input ${o.shown} redirected to an unsupported scheme ${url.protocol}`);
      continue;
    }
    throw statusError(status, showUrl(url));
  }
}

/** 404/403/other 4xx are the user's to fix; 408, 429 and 5xx are worth another try. */
export function statusError(status: number, shown: string): InputUnreadableError | UpstreamUnavailableError {
  const text = http.STATUS_CODES[status] ?? 'error';
  if (status === 408 || status === 429 || status >= 500) {
    return new UpstreamUnavailableError(`the input ${shown} answered ${status} ${text}; it will be tried again`);
  }
  if (status === 404 || status === 410)
    return new InputUnreadableError(`the input ${shown} was not found (HTTP ${status} ${text})`);
  if (status === 401 || status === 403)
    return new InputUnreadableError(`access to the input ${shown} was denied (HTTP ${status} ${text})`);
  return new InputUnreadableError(`the input ${shown} could not be downloaded (HTTP ${status} ${text})`);
}

/**
 * One GET. The socket's own DNS lookup refuses private addresses too: assertHostAllowed
 * checks a name once, and a name that answers differently the second time (DNS
 * rebinding) must not get through. Refused there, it is refused for good (issue #15), not
 * a network error worth another try.
 */
function get(
  url: URL,
  opts: {
    signal: AbortSignal;
    allowPrivate: boolean;
    resolve?: Resolve | undefined;
    headers?: Record<string, string> | undefined;
  },
): Promise<IncomingMessage> {
  const mod = url.protocol === 'https:' ? https : http;
  const lookup = opts.allowPrivate ? undefined : guardedLookup(opts.resolve);
  return new Promise((resolve, reject) => {
    const req = mod.get(
      url,
      { signal: opts.signal, lookup, headers: { 'user-agent': 'mediaplane', ...opts.headers } },
      resolve,
    );
    req.on('error', (err) => {
      const refused = privateAddressError(err);
      reject(refused ? new InputUnreadableError(hostNotAllowed(url, refused.problem), { cause: err }) : err);
    });
  });
}
