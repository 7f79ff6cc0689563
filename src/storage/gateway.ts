import { CancelledError, InputTooLargeError, InputUnreadableError, isRetryable, type MediaplaneError } from '../lib/errors.ts';
import { HttpInput, type HttpInputOptions } from './http.ts';
import type { FetchedInput, FetchOptions, InputSource } from './types.ts';

export interface GatewayConfig {
  ipfsGateways: readonly string[];
  arweaveGateways: readonly string[];
}

/**
 * Whether a host is a subdomain-style gateway (`CID.ipfs.GATEWAY`). The spec accepts only
 * path-style gateway URLs; a CID label is long (v0: 46, v1 base32: 59 characters), so short
 * labels such as `my.ipfs.example.com` are ordinary hosts.
 */
export function isSubdomainGatewayHost(hostname: string): boolean {
  return /^[a-z0-9]{20,}\.(ipfs|ipns)\./i.test(hostname);
}

/**
 * The URLs to try, in order, for a content-addressed input, or null for a plain URL.
 * Content has the same bytes on every gateway, so a gateway that is down or slow is
 * skipped for the next. Only path-style gateway URLs are understood (spec/API.md).
 */
export function gatewayCandidates(raw: string, cfg: GatewayConfig): string[] | null {
  const trim = (g: string): string => g.replace(/\/+$/, '');
  const url = new URL(raw);
  if (url.protocol === 'ipfs:' || url.protocol === 'ipns:') {
    // new URL('ipfs://CID/a.mp4') puts the CID in the host.
    const rest = `${url.host}${url.pathname === '/' ? '' : url.pathname}`;
    return cfg.ipfsGateways.map((g) => `${trim(g)}/${url.protocol.slice(0, -1)}/${rest}`);
  }
  if (url.protocol === 'ar:') {
    const rest = `${url.host}${url.pathname === '/' ? '' : url.pathname}`;
    return cfg.arweaveGateways.map((g) => `${trim(g)}/${rest}`);
  }
  if (isSubdomainGatewayHost(url.hostname)) {
    throw new InputUnreadableError('subdomain-style gateway URLs (https://CID.ipfs.GATEWAY/...) are not supported: use the path style https://GATEWAY/ipfs/CID/file');
  }
  const path = `${url.pathname}${url.search}`;
  if (/^\/(ipfs|ipns)\/[^/]+/.test(url.pathname)) {
    return dedupe([url.href, ...cfg.ipfsGateways.map((g) => `${trim(g)}${path}`)]);
  }
  if (cfg.arweaveGateways.some((g) => new URL(g).host === url.host)) {
    return dedupe([url.href, ...cfg.arweaveGateways.map((g) => `${trim(g)}${path}`)]);
  }
  return null;
}

function dedupe(xs: string[]): string[] {
  return [...new Set(xs)];
}

/** A content-addressed input fetched from the first gateway that serves it. */
export class GatewayInput implements InputSource {
  readonly description: string;
  readonly #candidates: HttpInput[];

  constructor(raw: string, candidates: string[], opts: HttpInputOptions) {
    this.description = raw.replace(/\?.*$/, '');
    this.#candidates = candidates.map((c) => new HttpInput(new URL(c), opts));
  }

  async fetch(opts: FetchOptions): Promise<FetchedInput> {
    let retryable: MediaplaneError | undefined;
    let last: MediaplaneError | undefined;
    for (const input of this.#candidates) {
      try {
        return await input.fetch(opts);
      } catch (err) {
        // Cancel and a too-large input are the same on every gateway: stop here.
        if (err instanceof CancelledError || err instanceof InputTooLargeError) throw err;
        last = err as MediaplaneError;
        if (isRetryable(err)) retryable = last;
      }
    }
    // Any gateway that was down might have had it: worth a retry of the whole job.
    throw retryable ?? last ?? new InputUnreadableError(`no gateway is configured for ${this.description}`);
  }
}
