import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { InputUnreadableError } from './errors.ts';

// Addresses a user-supplied URL must not reach unless the operator allows it (SSRF guard,
// spec/API.md "Input URL rules"): loopback, private (RFC 1918, RFC 4193), carrier-grade
// NAT, link-local (which holds the cloud metadata address 169.254.169.254), unspecified,
// multicast and reserved ranges.
const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16],
  ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96], ['2001:db8::', 32],
] as const) blocked.addSubnet(net, prefix, 'ipv6');

/** Whether an IP literal is loopback, private, link-local, metadata or otherwise not public. */
export function isPrivateAddress(ip: string): boolean {
  const bare = ip.replace(/^\[|\]$/g, '');
  const family = isIP(bare);
  if (family === 4) return blocked.check(bare, 'ipv4');
  if (family !== 6) return false;
  // An IPv4-mapped IPv6 address (::ffff:127.0.0.1) reaches the IPv4 host.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare);
  if (mapped?.[1]) return blocked.check(mapped[1], 'ipv4');
  return blocked.check(bare, 'ipv6');
}

export interface HostGuardOptions {
  allowPrivate: boolean;
}

/**
 * Says why `url` may not be fetched, or null when it may. Host names are resolved and every
 * address checked, so `localhost` or a name pointing at 10.0.0.1 is refused too. A name that
 * does not resolve is not refused here: fetching it will fail with its own message.
 */
export async function hostProblem(url: URL, opts: HostGuardOptions): Promise<string | null> {
  if (opts.allowPrivate) return null;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) return isPrivateAddress(host) ? `${host} is a loopback, private or link-local address` : null;
  let addresses: { address: string }[];
  try {
    addresses = await lookup(host, { all: true, verbatim: true });
  } catch {
    return null;
  }
  const bad = addresses.find((a) => isPrivateAddress(a.address));
  return bad ? `${host} resolves to ${bad.address}, a loopback, private or link-local address` : null;
}

/** Throws InputUnreadableError when `url` points at an address that is not allowed. */
export async function assertHostAllowed(url: URL, opts: HostGuardOptions): Promise<void> {
  const problem = await hostProblem(url, opts);
  if (problem) {
    throw new InputUnreadableError(`${url.protocol}//${url.host} is not allowed: ${problem} (the operator can allow it with MEDIAPLANE_ALLOW_PRIVATE_URLS=true)`);
  }
}
