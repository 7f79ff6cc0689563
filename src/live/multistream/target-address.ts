import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { hostNotAllowed, hostProblem, type Resolve, systemResolve } from '../../lib/net-guard.ts';

// A restream target's url meets the address guard (lib/net-guard.ts, as every URL a user gives
// does) before each connection, and ffmpeg is given the address that was checked: for rtmp://
// and srt:// the host name is replaced by it, so a name that answers differently the second
// time (DNS rebinding) reaches nothing new. rtmps:// keeps its name: TLS needs it (SNI and the
// certificate), so there the check and ffmpeg's own lookup are two resolutions.

export const TARGET_PROTOCOLS = ['rtmp:', 'rtmps:', 'srt:'] as const;

export interface TargetGuard {
  allowPrivate: boolean;
  resolve?: Resolve | undefined;
}

/** Why `url` is no restream target (its scheme, its form), or undefined; it never quotes the url (a secret). */
export function targetUrlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'must be a URL (rtmp://, rtmps:// or srt://)';
  }
  if (!(TARGET_PROTOCOLS as readonly string[]).includes(parsed.protocol))
    return 'must start with rtmp://, rtmps:// or srt://';
  if (parsed.hostname === '') return 'must name a host';
  if (parsed.protocol === 'srt:' && parsed.port === '') return 'an srt:// URL must name a port';
  return undefined;
}

export type AddressAnswer = { url: string } | { refused: string };

/**
 * The url ffmpeg is given for `url`: checked by the guard, with the checked address in place of
 * a host name (rtmp, srt). `refused` says why not, naming the host but never the path or query
 * (where the other service's key is).
 */
export async function guardedTargetUrl(url: string, guard: TargetGuard): Promise<AddressAnswer> {
  const problem = targetUrlProblem(url);
  if (problem !== undefined) return { refused: `the target's url ${problem}` };
  const parsed = new URL(url);
  let seen: readonly LookupAddress[] = [];
  const resolve: Resolve = async (host) => {
    seen = await (guard.resolve ?? systemResolve)(host);
    return seen;
  };
  const refused = await hostProblem(parsed, { allowPrivate: guard.allowPrivate, resolve });
  if (refused !== null) return { refused: hostNotAllowed(new URL(`${parsed.protocol}//${parsed.host}`), refused) };
  if (parsed.protocol === 'rtmps:' || isIP(parsed.hostname.replace(/^\[|\]$/g, '')) !== 0) return { url };
  if (seen.length === 0) seen = await resolve(parsed.hostname).catch(() => []);
  const first = seen[0];
  if (first === undefined) return { refused: `${parsed.protocol}//${parsed.host} does not resolve` };
  parsed.hostname = first.family === 6 ? `[${first.address}]` : first.address;
  return { url: parsed.toString() };
}
