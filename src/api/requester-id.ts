import { createHash } from 'node:crypto';

/**
 * The Task's `requesterId` (spec/API.md "The Task"): a hash of the requester's IP address and
 * a server salt, so tasks from one address can be told apart without storing the address.
 */
export function requesterId(salt: string, ip: string): string {
  return createHash('sha256').update(`${salt}:${ip}`).digest('hex').slice(0, 32);
}
