import {
  CancelledError,
  InputTooLargeError,
  InputUnreadableError,
  isRetryable,
  type MediaplaneError,
} from '../lib/errors.ts';
import { HttpInput, type HttpInputOptions } from './http.ts';
import type { FetchedInput, FetchOptions, InputSource } from './types.ts';

export interface GatewayConfig {
  ipfsGateways: readonly string[];
  arweaveGateways: readonly string[];
}

// A CID label is long (v0: 46, v1 base32: 59 characters), so short labels such as
// `my.ipfs.example.com` are ordinary hosts.
const CID_LABEL = /^[a-z0-9]{20,}$/i;
// A CIDv0 (base58btc, `Qm` and 44 more) as it reads once URL has lowercased the host name.
const LOWERCASED_CIDV0 = /^qm[a-z0-9]{44}$/;

interface SubdomainGateway {
  cid: string;
  namespace: 'ipfs' | 'ipns';
  gateway: string;
}

/**
 * A subdomain-style gateway host (`CID.ipfs.GATEWAY`) in its parts, or null. The CID label
 * may stand anywhere before `.ipfs.`/`.ipns.`: `x.CID.ipfs.dweb.link` is one too (issue #15).
 */
function subdomainGateway(hostname: string): SubdomainGateway | null {
  const labels = hostname.toLowerCase().split('.');
  for (let i = 0; i + 2 < labels.length; i++) {
    const [cid, namespace] = [labels[i] ?? '', labels[i + 1]];
    if ((namespace === 'ipfs' || namespace === 'ipns') && CID_LABEL.test(cid)) {
      return { cid, namespace, gateway: labels.slice(i + 2).join('.') };
    }
  }
  return null;
}

/** Whether a host is a subdomain-style gateway. The spec accepts only path-style gateway URLs. */
export function isSubdomainGatewayHost(hostname: string): boolean {
  return subdomainGateway(hostname) !== null;
}

/**
 * The path-style URL for a subdomain-style gateway URL, to show in the message that refuses
 * it; null for any other URL. The port is kept. URL lowercases host names, so a CIDv0
 * (`Qm...`, case-sensitive) cannot be read back: the hint then shows `<CID>` and says why.
 */
export function pathStyleHint(url: URL): string | null {
  const sub = subdomainGateway(url.hostname);
  if (!sub) return null;
  const host = url.port ? `${sub.gateway}:${url.port}` : sub.gateway;
  const lostCase = LOWERCASED_CIDV0.test(sub.cid);
  const hint = `${url.protocol}//${host}/${sub.namespace}/${lostCase ? '<CID>' : sub.cid}${url.pathname === '/' ? '' : url.pathname}`;
  return lostCase
    ? `${hint}, with the CIDv0 written in its original letter case (host names are lowercase, so it cannot be read back from this URL)`
    : hint;
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
  const hint = pathStyleHint(url);
  if (hint) {
    throw new InputUnreadableError(
      `subdomain-style gateway URLs (https://CID.ipfs.GATEWAY/...) are not supported: use the path style https://GATEWAY/ipfs/CID/file (for this URL: ${hint})`,
    );
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
