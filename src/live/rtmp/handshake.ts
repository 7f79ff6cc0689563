import { randomBytes } from 'node:crypto';
import { RtmpProtocolError } from './errors.ts';

// The plain RTMP handshake (Adobe's RTMP specification, section 5.2): the client sends C0 (the
// version, 3) and C1 (1536 bytes: time, zero, random), the server answers S0, S1 and S2 (an echo
// of C1), then the client sends C2. Flash-era clients (librtmp in OBS, ffmpeg) put an HMAC digest
// in C1; they check the server's only when S1's version field is non-zero, so an S1 with zeros
// there makes them fall back to the plain handshake, and their digest is accepted unread.

const VERSION = 3;
export const HANDSHAKE_SIZE = 1536;

export type HandshakeStep = { done: false; reply?: Buffer } | { done: true; reply?: Buffer; rest: Buffer };

/** The server side of one handshake, fed the client's bytes as they come. */
export class ServerHandshake {
  private buffered: Buffer = Buffer.alloc(0);
  private answered = false;

  /** Takes the next bytes; returns S0+S1+S2 once C0+C1 are in, and the bytes past C2 once done. */
  push(data: Buffer): HandshakeStep {
    this.buffered = this.buffered.length === 0 ? data : Buffer.concat([this.buffered, data]);
    let reply: Buffer | undefined;
    if (!this.answered) {
      if (this.buffered.length === 0) return { done: false };
      const version = this.buffered[0];
      if (version !== VERSION)
        throw new RtmpProtocolError(`not a plain RTMP handshake (version byte ${version ?? 'none'}, expected 3)`);
      if (this.buffered.length < 1 + HANDSHAKE_SIZE) return { done: false };
      reply = serverHello(this.buffered.subarray(1, 1 + HANDSHAKE_SIZE));
      this.buffered = this.buffered.subarray(1 + HANDSHAKE_SIZE);
      this.answered = true;
    }
    if (this.buffered.length < HANDSHAKE_SIZE) return reply ? { done: false, reply } : { done: false };
    // C2 should echo S1; clients that do it loosely are common and it proves nothing, so it is not checked.
    const rest = this.buffered.subarray(HANDSHAKE_SIZE);
    this.buffered = Buffer.alloc(0);
    return reply ? { done: true, reply, rest } : { done: true, rest };
  }
}

/** S0 + S1 (time 0, version field 0: no digest) + S2 (C1 echoed). */
function serverHello(c1: Buffer): Buffer {
  const s1 = Buffer.alloc(HANDSHAKE_SIZE);
  randomBytes(HANDSHAKE_SIZE - 8).copy(s1, 8);
  return Buffer.concat([Buffer.of(VERSION), s1, c1]);
}
