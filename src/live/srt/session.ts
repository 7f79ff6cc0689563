import { randomInt } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../../lib/log.ts';
import type { FlvSink } from '../ingest-types.ts';
import {
  type Handshake,
  HandshakeType,
  inductionRequest,
  parseHandshake,
  RejectReason,
  rejection,
  rejectionReason,
  withCookie,
  writeHandshake,
} from './handshake.ts';
import { ControlType, isControl, packetTimestamp, readHeader, shutdownPacket, withTimestamp } from './packet.ts';
import { type Remux, type RemuxExit, startRemux } from './remux.ts';

// One accepted SRT publish. Its remux ffmpeg listens on a loopback port; this session talks to
// it from a UDP socket of its own, so to ffmpeg the session is the caller: it sends its own
// induction to learn ffmpeg's cookie (which is bound to this socket's address, not the
// publisher's), then the publisher's conclusion with that cookie, and from then on forwards
// every packet both ways unchanged, but the publisher's shutdown (see #close). Replies to the
// publisher go out of the relay's public socket (`toPublisher`), from the address the
// publisher connected to.

export type EndKind = 'left' | 'cut' | 'refused';

export interface SrtSessionOptions {
  /** The publisher's `ip:port`, for logs. */
  remote: string;
  /** The publisher's conclusion handshake: packet, parsed, and when it came (performance.now()). */
  conclusion: { packet: Buffer; handshake: Handshake; receivedAt: number };
  sink: FlvSink;
  ffmpegPath: string;
  log: Logger;
  /** Sends a packet to the publisher from the relay's public socket. */
  toPublisher(packet: Buffer): void;
  /** How long the remux listener gets to answer (it takes a moment to bind). */
  handshakeTimeoutMs: number;
  /** Called once the session is over (after `sink.ended`). */
  onClosed(): void;
}

/**
 * Kernel buffers of the relay's sockets: every publish's packets pass through Node's event
 * loop, and a loop busy for a moment must not cost packets (SRT would resend them, but
 * only within its latency). The kernel caps them at net.core.rmem_max / wmem_max.
 */
export const SOCKET_BUFFERS = { recvBufferSize: 4 * 1024 * 1024, sendBufferSize: 4 * 1024 * 1024 };

const INDUCTION_RETRY_MS = 50;
/** How a remux drains what the publisher sent before it left: until its FLV output pauses for 0.5 s, at most 2.5 s. */
const DRAIN = { quietMs: 500, maxMs: 2500 };
/** How long a remux gets to flush its FLV after the shutdown reached it. */
const FLUSH_GRACE_MS = 3000;

export class SrtSession {
  readonly remote: string;
  /** Wall ms of the publisher's last packet (the relay's idle sweep reads it). */
  lastHeard = Date.now();
  readonly #o: SrtSessionOptions;
  readonly #publisherSocketId: number;
  readonly #socket: Socket;
  #remux: Remux | undefined;
  #remuxPort = 0;
  /** The publisher's latest conclusion (it repeats it every 250 ms) and when it came. */
  #conclusion: { packet: Buffer; receivedAt: number };
  /** ffmpeg's cookie for this session's socket: undefined until its induction response came. */
  #cookie: number | undefined;
  /** ffmpeg's socket id, from its conclusion response: where a shutdown to it goes. */
  #remuxSocketId: number | undefined;
  #ending: { kind: EndKind; reason: string } | undefined;
  #closed: Promise<void> | undefined;
  readonly #started = Date.now();

  constructor(o: SrtSessionOptions) {
    this.#o = o;
    this.remote = o.remote;
    this.#publisherSocketId = o.conclusion.handshake.socketId;
    this.#conclusion = o.conclusion;
    this.#socket = createSocket({ type: 'udp4', ...SOCKET_BUFFERS });
    this.#socket.on('error', (err) => o.log.warn({ remote: o.remote, err: err.message }, 'srt: session socket error'));
    this.#socket.on('message', (msg, from) => {
      if (from.address === '127.0.0.1' && from.port === this.#remuxPort) this.#fromRemux(msg);
    });
  }

  /**
   * Starts the remux and replays the handshake to it; resolves once the publisher's conclusion
   * went to ffmpeg. Rejects (after rejecting the publisher and ending the sink) when ffmpeg
   * does not answer within the handshake timeout.
   */
  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.#socket.bind(0, '127.0.0.1', resolve));
    this.#remuxPort = await freeUdpPort();
    if (this.#ending) return;
    const listenTimeoutMs = this.#o.handshakeTimeoutMs + 2000;
    this.#remux = startRemux({
      ffmpegPath: this.#o.ffmpegPath,
      port: this.#remuxPort,
      listenTimeoutMs,
      flv: this.#o.sink.flv,
    });
    void this.#remux.exited.then((exit) => this.#remuxExited(exit));
    const answered = await this.#induce();
    if (this.#ending) return;
    if (!answered) {
      await this.end('cut', `the remux did not answer within ${this.#o.handshakeTimeoutMs} ms`);
      throw new Error('the SRT remux listener did not answer');
    }
    this.#toRemux(this.#replayed(this.#cookie ?? 0));
  }

  /**
   * The publisher's conclusion for the remux: with the remux's cookie, and its timestamp moved
   * on by the time it waited here. libsrt takes the peer's clock from the conclusion that
   * carries HSREQ (its arrival time less its timestamp: processSrtMsg_HSREQ) and delivers
   * every packet by that clock plus the latency: a conclusion that waited a second for the
   * gate and the remux would hold every packet of the publish a second longer.
   */
  #replayed(cookie: number): Buffer {
    const { packet, receivedAt } = this.#conclusion;
    const waitedMicros = (performance.now() - receivedAt) * 1000;
    return withTimestamp(withCookie(packet, cookie), packet.readUInt32BE(8) + waitedMicros);
  }

  /** Sends inductions until ffmpeg's listener answers one (it is still binding at first). */
  async #induce(): Promise<boolean> {
    const induction = writeHandshake(
      inductionRequest({ socketId: this.#publisherSocketId, initialSequence: randomInt(2 ** 31) }),
      { timestamp: this.#timestamp(), destinationSocketId: 0 },
    );
    const deadline = Date.now() + this.#o.handshakeTimeoutMs;
    while (this.#cookie === undefined && !this.#ending && Date.now() < deadline) {
      this.#toRemux(induction);
      await new Promise((r) => setTimeout(r, INDUCTION_RETRY_MS));
    }
    return this.#cookie !== undefined;
  }

  /** A packet from the publisher: forwarded once ffmpeg's cookie is known (a conclusion with it). */
  fromPublisher(packet: Buffer): void {
    this.lastHeard = Date.now();
    if (this.#ending) return;
    const header = readHeader(packet);
    if (header?.controlType === ControlType.handshake) {
      if (parseHandshake(packet)?.type !== HandshakeType.conclusion) return;
      this.#conclusion = { packet, receivedAt: performance.now() };
      // A conclusion again (our first answer was lost): with the remux's cookie, as the first.
      if (this.#cookie !== undefined) this.#toRemux(this.#replayed(this.#cookie));
      return;
    }
    if (this.#cookie === undefined) return;
    // The publisher's shutdown is not passed on: the session sends its own once ffmpeg has drained (see #close).
    if (header?.controlType === ControlType.shutdown) void this.end('left', 'the publisher closed the connection');
    else this.#toRemux(packet);
  }

  #fromRemux(packet: Buffer): void {
    if (isControl(packet, ControlType.handshake)) {
      const hs = parseHandshake(packet);
      if (hs?.type === HandshakeType.induction && this.#cookie === undefined) {
        this.#cookie = hs.cookie;
        return;
      }
      if (hs?.type === HandshakeType.conclusion) this.#remuxSocketId = hs.socketId;
      const reason = hs && rejectionReason(hs);
      if (reason !== undefined) {
        this.#o.toPublisher(packet);
        void this.end('cut', `the remux refused the handshake (SRT reason ${reason})`);
        return;
      }
    }
    this.#o.toPublisher(packet);
  }

  #toRemux(packet: Buffer): void {
    if (this.#remuxPort === 0) return;
    this.#socket.send(packet, this.#remuxPort, '127.0.0.1');
  }

  #rejectPublisher(reason: number): void {
    const hs = rejection(this.#o.conclusion.handshake, reason);
    this.#o.toPublisher(
      writeHandshake(hs, { timestamp: this.#timestamp(), destinationSocketId: this.#publisherSocketId }),
    );
  }

  #timestamp(): number {
    return packetTimestamp((Date.now() - this.#started) * 1000);
  }

  #remuxExited(exit: RemuxExit): void {
    if (this.#ending) return;
    const silentMs = Date.now() - this.lastHeard;
    if (exit.refusal) void this.end('refused', exit.refusal);
    else if (silentMs > 1000) void this.end('cut', `the publisher sent nothing for ${Math.round(silentMs / 1000)} s`);
    else void this.end('cut', `the remux stopped${exit.lastError ? `: ${exit.lastError}` : ''}`);
  }

  /**
   * Ends the session once: a shutdown to the publisher (unless it left; a rejection while it
   * is still in its handshake) and to ffmpeg, which then finishes its FLV (killed after a
   * grace), the socket closed, then `sink.ended`.
   */
  end(kind: EndKind, reason: string): Promise<void> {
    if (this.#closed) return this.#closed;
    this.#ending = { kind, reason };
    this.#closed = this.#close(kind, reason);
    return this.#closed;
  }

  async #close(kind: EndKind, reason: string): Promise<void> {
    const timestamp = this.#timestamp();
    // Connected (ffmpeg answered its conclusion): a shutdown; still in its handshake: a rejection.
    if (kind !== 'left' && this.#remuxSocketId !== undefined)
      this.#o.toPublisher(shutdownPacket({ timestamp, destinationSocketId: this.#publisherSocketId }));
    else if (kind !== 'left') this.#rejectPublisher(RejectReason.unavailable);
    // A shutdown makes libsrt drop what ffmpeg has not read yet: the last half second of a
    // publish (a publisher flushes its MPEG-TS muxer in a burst as it closes). After the
    // publisher left, ffmpeg reads to the end first; a cut publish has no tail worth waiting for.
    if (kind === 'left' && this.#remux && this.#remuxSocketId !== undefined) await this.#remux.quiet(DRAIN);
    if (this.#remuxSocketId !== undefined)
      this.#toRemux(shutdownPacket({ timestamp, destinationSocketId: this.#remuxSocketId }));
    const remux = this.#remux;
    let exit: RemuxExit | undefined;
    if (remux) {
      // Without a connected peer there is nothing to flush.
      if (this.#remuxSocketId === undefined) remux.kill();
      const grace = setTimeout(() => remux.kill(), FLUSH_GRACE_MS);
      exit = await remux.exited;
      clearTimeout(grace);
    }
    this.#socket.close();
    const refusal = exit?.refusal;
    const [endKind, endReason] = refusal && kind !== 'refused' ? (['refused', refusal] as const) : [kind, reason];
    this.#o.log.info({ remote: this.remote, kind: endKind, reason: endReason }, 'srt: publish ended');
    this.#o.sink.ended(endKind, endReason);
    this.#o.onClosed();
  }
}

/** A UDP port free on loopback now (the remux binds it a moment later: a port taken meanwhile fails the handshake). */
function freeUdpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createSocket('udp4');
    probe.on('error', reject);
    probe.bind(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}
