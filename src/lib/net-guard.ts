import type { LookupAddress, LookupOptions } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { InputUnreadableError } from './errors.ts';

// Addresses a user-supplied URL or S3 endpoint must not reach unless the operator allows it
// (SSRF guard, spec/API.md "Input URL rules"). Issue #15: a hand-kept block list missed
// ranges (TEST-NETs, ::127.0.0.1, 6to4 of loopback...); ipaddr.js follows the IANA
// special-purpose registries, and only what it calls `unicast` is public.

type IPv4 = ipaddr.IPv4;
type IPv6 = ipaddr.IPv6;

const RANGE_WORDS: Readonly<Record<string, string>> = {
  unspecified: 'an unspecified address',
  broadcast: 'the broadcast address',
  multicast: 'a multicast address',
  linkLocal: 'a link-local address (the cloud metadata service lives there)',
  loopback: 'a loopback address',
  carrierGradeNat: 'a carrier-grade NAT address',
  private: 'a private address',
  uniqueLocal: 'a unique-local (private) address',
  deprecatedSiteLocal: 'a site-local (private) address',
  reserved: 'a reserved or documentation address',
  benchmarking: 'a benchmarking address',
  ipv4Mapped: 'an IPv4-mapped address',
  rfc6145: 'an IPv4-translated address (RFC 6145)',
  rfc6052: 'a NAT64 address (RFC 6052)',
  '6to4': 'a 6to4 address',
  teredo: 'a Teredo address',
};

function rangeWords(range: string): string {
  return RANGE_WORDS[range] ?? `a special-purpose address (${range})`;
}

function ipv4Problem(ip: IPv4): string | null {
  const range = ip.range();
  return range === 'unicast' ? null : rangeWords(range);
}

const v4At = (bytes: number[], at: number, flip = 0): IPv4 =>
  new ipaddr.IPv4(bytes.slice(at, at + 4).map((b) => b ^ flip));

const NAT64_WELL_KNOWN = ipaddr.IPv6.parse('64:ff9b::');
// RFC 4291 2.4 and the IANA IPv6 address space registry: global unicast is 2000::/3; the
// rest is reserved by the IETF or one of the special ranges above.
const GLOBAL_UNICAST = ipaddr.IPv6.parse('2000::');

/**
 * The IPv4 addresses an IPv6 address carries and reaches through a translator or tunnel:
 * IPv4-mapped and SIIT (RFC 6145) in the last 32 bits, NAT64 64:ff9b::/96 (RFC 6052) in the
 * last 32, 6to4 (RFC 3056) in bits 16-47, Teredo (RFC 4380) its server in bits 32-63 and
 * its client, inverted, in the last 32. Null when the range embeds none.
 */
function embeddedIpv4(ip: IPv6, range: string): IPv4[] | null {
  const b = ip.toByteArray();
  switch (range) {
    case 'ipv4Mapped':
    case 'rfc6145':
      return [v4At(b, 12)];
    case 'rfc6052':
      // 64:ff9b:1::/48 (RFC 8215) is for local use, with the IPv4 wherever the operator's
      // prefix length puts it: it cannot be told, so none is returned and it is refused.
      return ip.match(NAT64_WELL_KNOWN, 96) ? [v4At(b, 12)] : null;
    case '6to4':
      return [v4At(b, 2)];
    case 'teredo':
      return [v4At(b, 4), v4At(b, 12, 0xff)];
    default:
      return null;
  }
}

function ipv6Problem(ip: IPv6): string | null {
  const range = ip.range();
  const embedded = embeddedIpv4(ip, range);
  if (embedded) {
    for (const v4 of embedded) {
      const problem = ipv4Problem(v4);
      if (problem) return `${rangeWords(range)} embedding ${v4.toString()}, ${problem}`;
    }
    return null;
  }
  if (range === 'rfc6052')
    return 'a local-use NAT64 address (64:ff9b:1::/48, RFC 8215) whose IPv4 address cannot be told';
  if (range !== 'unicast') return rangeWords(range);
  // IPv4-compatible ::a.b.c.d (RFC 4291 2.5.5.1, deprecated): `[::127.0.0.1]` in a URL.
  const b = ip.toByteArray();
  if (b.slice(0, 12).every((x) => x === 0))
    return `an IPv4-compatible address (deprecated) of ${v4At(b, 12).toString()}`;
  if (!ip.match(GLOBAL_UNICAST, 3)) return 'outside the global unicast space 2000::/3';
  return null;
}

/**
 * Why an IP address is not a public one (loopback, private, link-local, documentation,
 * an IPv6 form of any of these...), or null when it is. Anything that is not an IP is refused.
 */
export function addressProblem(address: string): string | null {
  const bare = address.replace(/^\[|\]$/g, '');
  const family = isIP(bare);
  if (family === 4) return ipv4Problem(ipaddr.IPv4.parse(bare));
  const v6 = family === 6 ? parseIpv6(bare) : null;
  return v6 ? ipv6Problem(v6) : 'not an IP address';
}

/**
 * ipaddr.js reads `::a.b.c.d` as `::ffff:a.b.c.d`; the WHATWG URL parser writes the RFC 4291
 * form (`::7f00:1`), the one the socket would use. Null for what it cannot read (a zone index).
 */
function parseIpv6(text: string): IPv6 | null {
  try {
    return ipaddr.IPv6.parse(new URL(`http://[${text}]/`).hostname.slice(1, -1));
  } catch {
    return null;
  }
}

/** A host name as DNS sees it: a fully qualified `name.` is the same host as `name`. */
function bareName(host: string): string {
  return host.replace(/\.$/, '').toLowerCase();
}

/** RFC 6761 6.3: `localhost` and every name under it are loopback, whatever DNS says. */
function isLocalhostName(name: string): boolean {
  return name === 'localhost' || name.endsWith('.localhost');
}

/**
 * Why `host` may not be reached given the addresses it resolved to; null when all are public.
 * It says the rule, not the address or its kind (issue #25): the message reaches the client (a
 * 422, a task's error, a webhook's log), and where internal names point is a map of the network.
 */
function resolvedProblem(host: string, addresses: readonly LookupAddress[]): string | null {
  const refused = addresses.some(({ address }) => addressProblem(address) !== null);
  return refused ? `${host} resolves to a private or reserved address` : null;
}

/** Every address of a host name. A seam for tests (issue #15): DNS rebinding needs a resolver that changes its answer. */
export type Resolve = (hostname: string) => Promise<readonly LookupAddress[]>;

export const systemResolve: Resolve = (hostname) => lookup(hostname, { all: true, order: 'verbatim' });

export interface HostGuardOptions {
  allowPrivate: boolean;
  /** How names are resolved; the system resolver (dns.lookup) unless a test passes another. */
  resolve?: Resolve | undefined;
}

/**
 * Says why `url` may not be fetched, or null when it may. Host names are resolved and every
 * address checked, so `localhost` or a name pointing at 10.0.0.1 is refused too. A name that
 * does not resolve is not refused here: fetching it will fail with its own message.
 */
export async function hostProblem(url: URL, opts: HostGuardOptions): Promise<string | null> {
  if (opts.allowPrivate) return null;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) {
    const problem = addressProblem(host);
    return problem ? `${host} is ${problem}` : null;
  }
  const name = bareName(host);
  if (isLocalhostName(name)) return `${host} is a loopback name (RFC 6761)`;
  let addresses: readonly LookupAddress[];
  try {
    addresses = await (opts.resolve ?? systemResolve)(name);
  } catch {
    return null;
  }
  return resolvedProblem(host, addresses);
}

/**
 * `problem` with the way round it: a person trying the service on a laptop gives it a local
 * URL first, and the refusal is where they learn the setting. It adds no address.
 */
export function withAllowHint(problem: string): string {
  return `${problem} (the operator can allow it with MEDIAPLANE_ALLOW_PRIVATE_URLS=true)`;
}

/** The message for a refused host, the same whether the name was refused before the request or at connect time. */
export function hostNotAllowed(url: URL, problem: string): string {
  return `${url.protocol}//${url.host} is not allowed: ${withAllowHint(problem)}`;
}

/** Throws InputUnreadableError when `url` points at an address that is not allowed. */
export async function assertHostAllowed(url: URL, opts: HostGuardOptions): Promise<void> {
  const problem = await hostProblem(url, opts);
  if (problem) throw new InputUnreadableError(hostNotAllowed(url, problem));
}

/**
 * A socket's DNS lookup refused a name because it resolved to an address that is not public.
 * Not a MediaplaneError: each adapter says what it means for it (an unreadable input, a
 * refused storage). Its code is none of the network codes the AWS SDK retries.
 */
export class PrivateAddressError extends Error {
  readonly code = 'EPRIVATEADDRESS';
  /** Why, without the URL: "example.com resolves to a private or reserved address". */
  readonly problem: string;
  constructor(problem: string) {
    super(`refused to connect: ${problem}`);
    this.name = 'PrivateAddressError';
    this.problem = problem;
  }
}

/** The PrivateAddressError in `err` or its causes, if any. */
export function privateAddressError(err: unknown): PrivateAddressError | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof PrivateAddressError) return e;
  }
  return undefined;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

function wantedFamily(options: LookupOptions): 4 | 6 | undefined {
  const f = options.family;
  if (f === 4 || f === 'IPv4') return 4;
  if (f === 6 || f === 'IPv6') return 6;
  return undefined;
}

/**
 * A `lookup` for sockets (net.connect, http.Agent) that refuses names resolving to an address
 * that is not public. The check before a request resolves a name once; the socket resolves
 * it again, and a name that answers differently the second time (DNS rebinding, issue #15)
 * must not get through. IP literals never reach a lookup: they are checked before.
 */
export function guardedLookup(resolve: Resolve = systemResolve): LookupFunction {
  return (hostname, options, callback: LookupCallback) => {
    const name = bareName(hostname);
    if (isLocalhostName(name))
      return callback(new PrivateAddressError(`${hostname} is a loopback name (RFC 6761)`), '', 0);
    resolve(name).then(
      (all) => {
        const problem = resolvedProblem(hostname, all);
        if (problem) return callback(new PrivateAddressError(problem), '', 0);
        const family = wantedFamily(options);
        const list = family ? all.filter((a) => a.family === family) : [...all];
        const first = list[0];
        if (!first)
          return callback(
            Object.assign(new Error(`${hostname} has no IPv${family ?? ''} address`), { code: 'ENOTFOUND' }),
            '',
            0,
          );
        if (options.all) return callback(null, list);
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };
}
