import { createHmac, randomBytes } from 'node:crypto';

// SYN cookies (draft-sharabayko-srt section 4.3.1.1, after UDT): the listener answers an
// induction with a cookie made from the caller's address and the time, and keeps no state;
// a conclusion must bring it back. So a flood of inductions costs no memory, and a conclusion
// from an address that never had an induction answered is told apart. As libsrt does, a
// cookie is good for the minute it was made in and the next.

const MINUTE_MS = 60_000;

export class SynCookies {
  readonly #secret: Buffer;
  readonly #now: () => number;

  constructor(o: { secret?: Buffer; now?: () => number } = {}) {
    this.#secret = o.secret ?? randomBytes(32);
    this.#now = o.now ?? Date.now;
  }

  /** The cookie for a caller at `remote` (`ip:port`) now. */
  cookieFor(remote: string): number {
    return this.#bake(remote, Math.floor(this.#now() / MINUTE_MS));
  }

  /** Whether `cookie` is one this listener gave `remote` this minute or the last. */
  valid(remote: string, cookie: number): boolean {
    const minute = Math.floor(this.#now() / MINUTE_MS);
    return cookie === this.#bake(remote, minute) || cookie === this.#bake(remote, minute - 1);
  }

  #bake(remote: string, minute: number): number {
    return createHmac('sha256', this.#secret).update(`${remote}|${minute}`).digest().readUInt32BE(0);
  }
}
