import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../../lib/log.ts';
import type { IngestListener, PublishAttempt, PublishDecision, PublishGate } from '../ingest-types.ts';
import { SynCookies } from './cookie.ts';
import {
  asksEncryption,
  type Handshake,
  HandshakeType,
  HS_VERSION_5,
  inductionResponse,
  parseHandshake,
  RejectReason,
  rejection,
  streamIdOf,
  writeHandshake,
} from './handshake.ts';
import { ControlType, HEADER_BYTES, MAX_PACKET_BYTES, packetTimestamp, readHeader } from './packet.ts';
import { SOCKET_BUFFERS, SrtSession } from './session.ts';
import { type PublishTarget, publishTarget } from './stream-id.ts';

// SRT ingest: one UDP socket on the SRT port, in front of one remux ffmpeg per accepted
// publish. Debian's ffmpeg 5.1 cannot check a stream id, and no process may wait per stream
// before its key is checked, so the relay itself answers the induction (with a stateless SYN
// cookie), reads the stream id from the conclusion, asks the gate, and refuses with an SRT
// rejection or hands the publisher to an SrtSession (session.ts), which starts the remux and
// forwards the packets. Anything else that arrives is dropped, logged at most once per peer
// per LOG_EVERY_MS.

export interface SrtRelayOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  log: Logger;
  gate: PublishGate;
  ffmpegPath: string;
  /** A publisher that sends nothing for this long is cut off. */
  idleTimeoutMs: number;
  /** Most publishers waiting for the gate's decision at once (default 32); past it a publisher is refused as overload. */
  maxPending?: number;
  /** Most publishes at once (default 1024; the gate has its own, smaller limit). */
  maxSessions?: number;
  /** How long a remux gets to answer the relay's induction (default 2500 ms: libsrt callers give up after 3 s). */
  handshakeTimeoutMs?: number;
}

export interface SrtRelay extends IngestListener {
  /** Remux ffmpegs this relay started: one per accepted publish, none for a refused one. */
  readonly remuxStarts: number;
  /** Publishes under way now. */
  readonly sessions: number;
}

/** Listens for SRT publishers on `host:port` (UDP). */
export async function startSrtRelay(o: SrtRelayOptions): Promise<SrtRelay> {
  const relay = new Relay(o);
  await relay.listen();
  return relay;
}

const LOG_EVERY_MS = 10_000;
/** Peers remembered for the drop log's rate limit; past it the oldest are forgotten. */
const LOGGED_PEERS = 1024;
/** A refusal is answered again, without asking the gate, to the caller's repeated conclusions. */
const REFUSAL_MEMORY_MS = 10_000;
/** Refusals remembered at once (each needs a cookie, so a real round trip, from its address). */
const REFUSALS_KEPT = 4096;

interface Pending {
  cut?: string;
  session?: SrtSession;
}

class Relay implements SrtRelay {
  readonly protocol = 'srt';
  port = 0;
  remuxStarts = 0;
  readonly #o: SrtRelayOptions;
  readonly #socket: Socket;
  readonly #cookies = new SynCookies();
  readonly #sessions = new Map<string, SrtSession>();
  readonly #pending = new Map<string, Pending>();
  readonly #refused = new Map<string, { socketId: number; packet: Buffer; until: number }>();
  readonly #dropLogged = new Map<string, number>();
  #sweep: NodeJS.Timeout | undefined;
  #closing = false;
  #socketClosed = false;

  constructor(o: SrtRelayOptions) {
    this.#o = o;
    this.#socket = createSocket({ type: isIPv6(o.host) ? 'udp6' : 'udp4', ...SOCKET_BUFFERS });
    this.#socket.on('message', (msg, from) => this.#onMessage(msg, from));
    this.#socket.on('error', (err) => o.log.warn({ err: err.message }, 'srt: socket error'));
  }

  get sessions(): number {
    return this.#sessions.size;
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.#socket.once('error', reject);
      this.#socket.bind(this.#o.port, this.#o.host, () => {
        this.#socket.off('error', reject);
        resolve();
      });
    });
    this.port = this.#socket.address().port;
    const every = Math.min(1000, Math.max(50, this.#o.idleTimeoutMs / 4));
    this.#sweep = setInterval(() => this.#sweepIdle(), every);
    this.#sweep.unref();
  }

  #onMessage(packet: Buffer, from: RemoteInfo): void {
    const remote = from.family === 'IPv6' ? `[${from.address}]:${from.port}` : `${from.address}:${from.port}`;
    const dropped = this.#route({ remote, from, packet, receivedAt: performance.now() });
    if (dropped) this.#drop(remote, dropped);
  }

  /** Hands a datagram to its session or answers its handshake; says what it was when it is dropped. */
  #route(d: { remote: string; from: RemoteInfo; packet: Buffer; receivedAt: number }): string | undefined {
    const { remote, from, packet, receivedAt } = d;
    if (packet.length < HEADER_BYTES || packet.length > MAX_PACKET_BYTES)
      return `a datagram of ${packet.length} bytes, no SRT packet`;
    const session = this.#sessions.get(remote);
    if (session) session.fromPublisher(packet);
    // The caller repeats its conclusion every 250 ms while the gate decides.
    if (session || this.#pending.has(remote) || this.#closing) return undefined;
    if (readHeader(packet)?.controlType !== ControlType.handshake) return 'a packet outside any session';
    const hs = parseHandshake(packet);
    if (!hs) return 'a malformed handshake';
    if (hs.type === HandshakeType.induction) this.#answerInduction(remote, from, hs);
    else if (hs.type === HandshakeType.conclusion) return this.#conclude({ remote, from, packet, hs, receivedAt });
    else return `a handshake of type ${hs.type}`;
    return undefined;
  }

  #answerInduction(remote: string, from: RemoteInfo, hs: Handshake): void {
    const answer = inductionResponse(hs, this.#cookies.cookieFor(remote));
    this.#send(writeHandshake(answer, { timestamp: this.#timestamp(), destinationSocketId: hs.socketId }), from);
  }

  /** A conclusion: refused at once, or handed to the gate; says what it was when it is dropped. */
  #conclude(c: {
    remote: string;
    from: RemoteInfo;
    packet: Buffer;
    hs: Handshake;
    receivedAt: number;
  }): string | undefined {
    const { remote, from, hs } = c;
    const refused = this.#refused.get(remote);
    if (refused && refused.socketId === hs.socketId) this.#send(refused.packet, from);
    else if (!this.#cookies.valid(remote, hs.cookie)) return 'a conclusion without an induction (not our cookie)';
    else {
      const target = this.#publishTarget(hs);
      if ('refused' in target) this.#refuse({ remote, from, hs, reason: target.refused, why: target.why });
      else void this.#admit({ ...c, streamKey: target.streamKey });
    }
    return undefined;
  }

  /** The key a conclusion publishes to, or why it is refused before the gate is asked. */
  #publishTarget(hs: Handshake): PublishTarget {
    if (hs.version !== HS_VERSION_5)
      return { refused: RejectReason.version, why: 'an SRT caller older than HSv5 (libsrt 1.3)' };
    if (asksEncryption(hs))
      return {
        refused: RejectReason.unsecure,
        why: 'SRT encryption (a passphrase) is not taken here: connect without one',
      };
    if (this.#pending.size >= (this.#o.maxPending ?? 32) || this.#sessions.size >= (this.#o.maxSessions ?? 1024))
      return { refused: RejectReason.overload, why: 'too many SRT publishers at once' };
    return publishTarget(streamIdOf(hs));
  }

  /** Asks the gate; starts a session for an acceptance. */
  async #admit(c: {
    remote: string;
    from: RemoteInfo;
    packet: Buffer;
    hs: Handshake;
    receivedAt: number;
    streamKey: string;
  }): Promise<void> {
    const { remote, from, hs } = c;
    const pending: Pending = {};
    this.#pending.set(remote, pending);
    const attempt: PublishAttempt = {
      protocol: 'srt',
      streamKey: c.streamKey,
      remote,
      disconnect: (reason) => {
        if (pending.session) void pending.session.end('cut', reason);
        else pending.cut = reason;
      },
    };
    let decision: PublishDecision;
    try {
      decision = await this.#o.gate(attempt);
    } catch (err) {
      this.#o.log.error({ remote, err }, 'srt: the publish gate failed');
      decision = { accepted: false, code: 'Rejected', description: 'the service could not check the stream key' };
    } finally {
      this.#pending.delete(remote);
    }
    if (!decision.accepted) {
      // BadName (no such key, or suspended) is forbidden; Rejected means the stream or the node cannot take it now.
      const reason = decision.code === 'BadName' ? RejectReason.forbidden : RejectReason.overload;
      return this.#refuse({ remote, from, hs, reason, why: decision.description });
    }
    const cut = pending.cut ?? (this.#closing ? 'the ingest is closing' : undefined);
    if (cut !== undefined) {
      this.#refuse({ remote, from, hs, reason: RejectReason.unavailable, why: cut });
      decision.sink.flv.end();
      return decision.sink.ended('cut', cut);
    }
    const session = new SrtSession({
      remote,
      conclusion: { packet: c.packet, handshake: hs, receivedAt: c.receivedAt },
      sink: decision.sink,
      ffmpegPath: this.#o.ffmpegPath,
      log: this.#o.log,
      toPublisher: (packet) => this.#send(packet, from),
      handshakeTimeoutMs: this.#o.handshakeTimeoutMs ?? 2500,
      onClosed: () => {
        if (this.#sessions.get(remote) === session) this.#sessions.delete(remote);
      },
    });
    pending.session = session;
    this.#sessions.set(remote, session);
    this.remuxStarts++;
    this.#o.log.info({ remote }, 'srt: publish accepted');
    await session.start().catch((err: Error) => this.#o.log.warn({ remote, err: err.message }, 'srt: publish failed'));
  }

  #refuse(r: { remote: string; from: RemoteInfo; hs: Handshake; reason: number; why: string }): void {
    const packet = writeHandshake(rejection(r.hs, r.reason), {
      timestamp: this.#timestamp(),
      destinationSocketId: r.hs.socketId,
    });
    this.#send(packet, r.from);
    if (this.#refused.size >= REFUSALS_KEPT) this.#refused.delete(this.#refused.keys().next().value ?? '');
    this.#refused.set(r.remote, { socketId: r.hs.socketId, packet, until: Date.now() + REFUSAL_MEMORY_MS });
    this.#o.log.info({ remote: r.remote, srtReason: r.reason, reason: r.why }, 'srt: publish refused');
  }

  #drop(remote: string, what: string): void {
    const now = Date.now();
    if (now - (this.#dropLogged.get(remote) ?? -Infinity) < LOG_EVERY_MS) return;
    if (this.#dropLogged.size >= LOGGED_PEERS) this.#dropLogged.delete(this.#dropLogged.keys().next().value ?? '');
    this.#dropLogged.set(remote, now);
    this.#o.log.warn({ remote }, `srt: dropped ${what} (logged once per peer every ${LOG_EVERY_MS / 1000} s)`);
  }

  #send(packet: Buffer, to: RemoteInfo): void {
    // A publish whose gate answered after close(): its refusal has no socket to go out of.
    if (this.#socketClosed) return;
    this.#socket.send(packet, to.port, to.address);
  }

  #timestamp(): number {
    return packetTimestamp(performance.now() * 1000);
  }

  #sweepIdle(): void {
    const now = Date.now();
    for (const session of this.#sessions.values()) {
      const silentMs = now - session.lastHeard;
      if (silentMs > this.#o.idleTimeoutMs)
        void session.end('cut', `the publisher sent nothing for ${Math.round(silentMs / 1000)} s`);
    }
    for (const [remote, refused] of this.#refused) if (refused.until < now) this.#refused.delete(remote);
  }

  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    clearInterval(this.#sweep);
    await Promise.all([...this.#sessions.values()].map((s) => s.end('cut', 'the ingest is closing')));
    this.#socketClosed = true;
    await new Promise<void>((resolve) => this.#socket.close(() => resolve()));
  }
}
