import * as Proof from '@storacha/client/proof';
import type { Delegation } from '@storacha/client/types';
import { isDelegation } from '@ucanto/core';
import { ValidationError } from '../../lib/errors.ts';

// Request-time checks of the caller's UCAN delegation (issue 5): everything that would make
// the upload fail later for a reason the caller can fix is a 422 before the task is queued.
// Messages name the field and the problem and never quote the proof.

const DEFAULT_FIELD = 'storage.credentials.proof';

/** The abilities uploadDirectory invokes on the space (`filecoin/offer` is optional, see publish.ts). */
export const REQUIRED_ABILITIES = ['space/blob/add', 'space/index/add', 'upload/add'] as const;

export interface CheckedProof {
  delegation: Delegation;
  /** The space (did:key) the caller delegated. */
  space: `did:key:${string}`;
  /** Whether the caller also granted filecoin/offer (then the client offers pieces for deals). */
  canOfferFilecoin: boolean;
  /** Seconds since the epoch; Infinity when it does not expire. */
  expiration: number;
}

/** `can` covers `ability` when equal, `*`, or a `ns/*` prefix of it (UCAN 0.9 ability matching). */
export function grants(can: string, ability: string): boolean {
  if (can === '*' || can === ability) return true;
  return can.endsWith('/*') && ability.startsWith(can.slice(0, -1));
}

export async function parseProof(proofBase64: string, field = DEFAULT_FIELD): Promise<Delegation> {
  try {
    return await Proof.parse(proofBase64.trim());
  } catch {
    throw new ValidationError(
      `${field}: cannot be parsed: expected a base64 UCAN delegation (a CAR, as \`storacha delegation create --base64\` prints)`,
    );
  }
}

/**
 * Parses and checks a proof: delegated to this service's agent, not expired, not yet-to-start,
 * and granting the upload abilities on one did:key space. Throws ValidationError otherwise,
 * its messages naming `field` (where the caller put the proof; `storage.credentials.proof`).
 */
export async function validateDwebProof(
  proofBase64: string,
  opts: { agentDid: string; now?: Date; field?: string },
): Promise<CheckedProof> {
  const field = opts.field ?? DEFAULT_FIELD;
  const delegation = await parseProof(proofBase64, field);
  const nowSec = Math.floor((opts.now ?? new Date()).getTime() / 1000);
  const problems: string[] = [];
  const audience = delegation.audience.did();
  if (audience !== opts.agentDid) {
    problems.push(
      `${field}: is delegated to ${audience}, not to this service's agent ${opts.agentDid} (see \`./mediaplane agent did\`)`,
    );
  }
  // Every link of the chain must be in force: the service refuses an expired proof anywhere in it.
  const chain = [delegation, ...proofsOf(delegation)];
  if (chain.some((d) => d.expiration !== undefined && d.expiration !== null && d.expiration <= nowSec)) {
    const when = Math.min(...chain.map((d) => d.expiration ?? Infinity));
    problems.push(`${field}: has expired (${new Date(when * 1000).toISOString()})`);
  }
  if (chain.some((d) => d.notBefore !== undefined && d.notBefore > nowSec)) {
    problems.push(`${field}: is not valid yet (its notBefore is in the future)`);
  }
  const caps = delegation.capabilities.filter((c) => typeof c.with === 'string' && c.with.startsWith('did:key:'));
  const spaces = [
    ...new Set(REQUIRED_ABILITIES.flatMap((a) => caps.filter((c) => grants(c.can, a)).map((c) => c.with))),
  ];
  const missing = REQUIRED_ABILITIES.filter((a) => !caps.some((c) => grants(c.can, a)));
  if (missing.length > 0) {
    problems.push(`${field}: lacks ${missing.join(', ')} on a space (needs ${REQUIRED_ABILITIES.join(', ')})`);
  } else if (spaces.length !== 1) {
    problems.push(`${field}: must grant the upload abilities on exactly one space (found ${spaces.length})`);
  }
  if (problems.length > 0) throw new ValidationError(problems);
  const space = spaces[0] as `did:key:${string}`;
  return {
    delegation,
    space,
    canOfferFilecoin: caps.some((c) => c.with === space && grants(c.can, 'filecoin/offer')),
    expiration: delegation.expiration ?? Infinity,
  };
}

function proofsOf(d: Delegation): Delegation[] {
  const out: Delegation[] = [];
  for (const p of d.proofs) {
    // A proof may be only a CID link (not included in the CAR): nothing to check there.
    if (isDelegation(p)) out.push(p, ...proofsOf(p));
  }
  return out;
}
