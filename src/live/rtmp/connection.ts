import type { Socket } from 'node:net';
import type { PublishGate } from '../ingest-types.ts';
import { ChunkReader, type ChunkReaderLimits } from './chunk-reader.ts';
import { writeChunks } from './chunk-writer.ts';
import { RtmpProtocolError } from './errors.ts';
import { ServerHandshake } from './handshake.ts';
import {
  acknowledgement,
  command,
  MessageType,
  type RtmpCommand,
  type RtmpMessage,
  readCommand,
  readUInt32,
  setChunkSize,
  setPeerBandwidth,
  UserControlEvent,
  userControl,
  windowAckSize,
} from './messages.ts';
import { Publish, type RtmpLog } from './publish.ts';

// One publisher's TCP connection: the handshake, then chunk streams carrying control messages,
// NetConnection commands (connect, createStream) and NetStream commands (publish and the rest,
// Adobe's RTMP specification, section 7.2). Whatever the peer sends that breaks the protocol,
// a stall or a flood closes this connection alone, with a log line; a publish in progress ends
// with `cut` (or `left` when the peer went away).

export interface RtmpConnectionOptions {
  socket: Socket;
  gate: PublishGate;
  log: RtmpLog;
  idleTimeoutMs: number;
  limits: ChunkReaderLimits;
  /** A short mark for logs (`rtmp-7`): never the stream key. */
  id: string;
}

/** What the server tells a client of itself (FMS's figures, which clients know). */
const OUT_CHUNK_SIZE = 4096;
const WINDOW_ACK_SIZE = 2_500_000;
const MAX_STREAMS = 8;
const MAX_MESSAGES_PER_SECOND = 20_000;
/** How long a refused client gets to read its answer before the connection is dropped. */
const LINGER_MS = 2000;

export class RtmpConnection {
  readonly id: string;
  readonly remote: string;
  private readonly socket: Socket;
  private readonly gate: PublishGate;
  private readonly log: RtmpLog;
  private readonly idleTimeoutMs: number;
  private handshake: ServerHandshake | undefined = new ServerHandshake();
  private readonly reader: ChunkReader;
  /** Messages read and not yet handled, from `next` on (an index: shift() on thousands of tiny messages is quadratic). */
  private queue: RtmpMessage[] = [];
  private next = 0;
  private timer: NodeJS.Timeout | undefined;
  private connected = false;
  private readonly streams = new Set<number>();
  private nextStreamId = 1;
  private publish: Publish | undefined;
  private received = 0;
  private ackWindow = 0;
  private ackedAt = 0;
  private closing = false;
  private outChunkSize = 128;
  private cutReason: string | undefined;
  private rateWindowStart = 0;
  private rateWindowMessages = 0;

  constructor(o: RtmpConnectionOptions) {
    this.id = o.id;
    this.socket = o.socket;
    this.remote = `${o.socket.remoteAddress ?? '?'}:${o.socket.remotePort ?? '?'}`;
    this.gate = o.gate;
    this.log = o.log;
    this.idleTimeoutMs = o.idleTimeoutMs;
    this.reader = new ChunkReader(o.limits);
    // The handshake must be done within one idle timeout; after it, any bytes restart the clock.
    this.armIdle();
    this.socket.setNoDelay(true);
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('error', () => {}); // 'close' follows and says it
    this.socket.on('close', () => this.onSocketClose());
  }

  /** Cuts the connection off: disconnect(), an idle publisher, the server closing. */
  cut(reason: string): void {
    if (this.socket.destroyed) return;
    this.log.info({ remote: this.remote, connection: this.id, reason }, 'rtmp: connection cut off');
    this.cutReason = reason;
    this.publish?.finish('cut', reason);
    this.socket.destroy();
  }

  private armIdle(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.onIdle(), this.idleTimeoutMs);
  }

  private onIdle(): void {
    const what = this.handshake ? 'the RTMP handshake was not done' : 'nothing was received';
    this.cut(`${what} within ${this.idleTimeoutMs / 1000} s`);
  }

  private onData(chunk: Buffer): void {
    if (this.closing) return;
    if (!this.handshake) this.timer?.refresh();
    this.received += chunk.length;
    try {
      const rest = this.handshake ? this.handshakeStep(chunk) : chunk;
      if (rest === undefined || rest.length === 0) return;
      const messages = this.reader.push(rest);
      this.countMessages(messages.length);
      this.queue = this.next < this.queue.length ? this.queue.slice(this.next).concat(messages) : messages;
      this.next = 0;
      this.acknowledge();
      this.pump();
    } catch (err) {
      this.fail(err);
    }
  }

  /** Handshake bytes; returns the bytes past C2 once it is done. */
  private handshakeStep(chunk: Buffer): Buffer | undefined {
    const step = this.handshake?.push(chunk);
    if (step?.reply) this.socket.write(step.reply);
    if (!step?.done) return undefined;
    this.handshake = undefined;
    this.armIdle();
    return step.rest;
  }

  /** A publisher sends a hundred or so messages a second; tens of thousands of tiny ones are a flood that costs CPU, not memory. */
  private countMessages(n: number): void {
    const now = Date.now();
    if (now - this.rateWindowStart >= 1000) {
      this.rateWindowStart = now;
      this.rateWindowMessages = 0;
    }
    this.rateWindowMessages += n;
    if (this.rateWindowMessages > MAX_MESSAGES_PER_SECOND)
      throw new RtmpProtocolError(`more than ${MAX_MESSAGES_PER_SECOND} messages in a second`);
  }

  /** Section 5.4.3: an Acknowledgement each time the peer's window of bytes has come in. */
  private acknowledge(): void {
    if (this.ackWindow === 0 || this.received - this.ackedAt < this.ackWindow) return;
    this.ackedAt = this.received;
    this.send(acknowledgement(this.received));
  }

  /** Handles queued messages until one must wait (the gate, the sink's backpressure); reading pauses meanwhile. */
  private pump(): void {
    try {
      while (this.next < this.queue.length && !this.closing && !this.publish?.waiting) {
        const message = this.queue[this.next++];
        if (message) this.handle(message);
      }
    } catch (err) {
      this.fail(err);
      return;
    }
    if (this.publish?.waiting) this.pauseReading();
    else if (!this.closing) this.resumeReading();
  }

  private pauseReading(): void {
    if (this.socket.isPaused()) return;
    this.socket.pause();
    // Not the publisher's stall: the clock stops while this side makes it wait.
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private resumeReading(): void {
    if (!this.socket.isPaused()) return;
    this.armIdle();
    this.socket.resume();
  }

  private handle(message: RtmpMessage): void {
    switch (message.typeId) {
      case MessageType.UserControl:
        if (message.payload.length >= 6 && message.payload.readUInt16BE(0) === UserControlEvent.PingRequest)
          this.send(userControl(UserControlEvent.PingResponse, readUInt32(message.payload, 2, 'Ping')));
        return;
      case MessageType.WindowAckSize:
        this.ackWindow = readUInt32(message.payload, 0, 'Window Acknowledgement Size');
        return;
      case MessageType.CommandAmf0:
      case MessageType.CommandAmf3:
        this.onCommand(readCommand(message), message.streamId);
        return;
      case MessageType.Audio:
      case MessageType.Video:
      case MessageType.DataAmf0:
        this.publish?.media(message);
        return;
      default:
        // Acknowledgement, Set Peer Bandwidth, AMF3 data, shared objects: nothing to do for a publisher.
        return;
    }
  }

  private onCommand(cmd: RtmpCommand, streamId: number): void {
    if (cmd.name === 'connect') {
      this.onConnect(cmd);
      return;
    }
    if (!this.connected) throw new RtmpProtocolError(`"${cmd.name.slice(0, 32)}" before connect`);
    switch (cmd.name) {
      case 'releaseStream':
      case 'FCPublish':
        this.result(cmd.transactionId, undefined);
        return;
      case 'createStream':
        this.onCreateStream(cmd);
        return;
      case 'publish':
        this.onPublish(cmd, streamId);
        return;
      case 'FCUnpublish':
      case 'closeStream':
        this.publish?.finish('left', 'the publisher stopped publishing');
        return;
      case 'deleteStream': {
        const id = typeof cmd.args[0] === 'number' ? cmd.args[0] : -1;
        if (this.publish?.streamId === id) this.publish.finish('left', 'the publisher stopped publishing');
        this.streams.delete(id);
        return;
      }
      default:
        return;
    }
  }

  /** NetConnection connect (section 7.2.1.1): the application must be `live`. */
  private onConnect(cmd: RtmpCommand): void {
    const object = cmd.object;
    const app = object !== null && typeof object === 'object' && 'app' in object ? object.app : undefined;
    const name = typeof app === 'string' ? app.replace(/\?.*$/, '').replace(/\/+$/, '') : '';
    if (name !== 'live') {
      this.log.info({ remote: this.remote, connection: this.id }, 'rtmp: connect to an application other than live');
      this.send(
        command({
          name: '_error',
          transactionId: cmd.transactionId,
          args: [
            {
              level: 'error',
              code: 'NetConnection.Connect.Rejected',
              description: 'Unknown application: publish to rtmp://HOST:PORT/live/STREAM_KEY',
            },
          ],
        }),
      );
      this.closeSoon();
      return;
    }
    this.connected = true;
    this.send(windowAckSize(WINDOW_ACK_SIZE));
    this.send(setPeerBandwidth(WINDOW_ACK_SIZE));
    this.send(setChunkSize(OUT_CHUNK_SIZE));
    this.outChunkSize = OUT_CHUNK_SIZE;
    const status = { level: 'status', code: 'NetConnection.Connect.Success', description: 'Connection succeeded.' };
    this.result(cmd.transactionId, { fmsVer: 'FMS/3,0,1,123', capabilities: 31 }, { ...status, objectEncoding: 0 });
  }

  private onCreateStream(cmd: RtmpCommand): void {
    if (this.streams.size >= MAX_STREAMS) throw new RtmpProtocolError(`more than ${MAX_STREAMS} streams created`);
    const id = this.nextStreamId++;
    this.streams.add(id);
    this.result(cmd.transactionId, null, id);
  }

  /** NetStream publish (section 7.2.2.6): the name is the stream key; the gate answers before any media is read. */
  private onPublish(cmd: RtmpCommand, streamId: number): void {
    if (!this.streams.has(streamId)) throw new RtmpProtocolError('publish on a stream that was not created');
    if (this.publish?.active) throw new RtmpProtocolError('a second publish on one connection');
    const name = typeof cmd.args[0] === 'string' ? cmd.args[0] : '';
    this.publish = new Publish({
      streamId,
      streamKey: name.replace(/\?.*$/s, ''),
      remote: this.remote,
      connection: this.id,
      gate: this.gate,
      log: this.log,
      send: (m) => this.send(m),
      disconnect: (reason) => this.cut(reason),
      close: () => this.closeSoon(),
      resume: () => this.pump(),
    });
  }

  private result(transactionId: number, object: RtmpCommand['object'], ...args: RtmpCommand['args']): void {
    this.send(command({ name: '_result', transactionId, object, args }));
  }

  private send(message: RtmpMessage): void {
    if (this.socket.writable) this.socket.write(writeChunks(message, this.outChunkSize));
  }

  /** Ends after what was sent has gone out (a refusal the client should read), reading nothing more. */
  private closeSoon(): void {
    this.closing = true;
    this.queue = [];
    this.next = 0;
    this.socket.end();
    setTimeout(() => this.socket.destroy(), LINGER_MS).unref();
  }

  private fail(err: unknown): void {
    const reason = `protocol error: ${err instanceof Error ? err.message : String(err)}`;
    this.log.warn({ remote: this.remote, connection: this.id, reason }, 'rtmp: connection closed');
    this.publish?.finish('cut', reason);
    this.closing = true;
    this.socket.destroy();
  }

  private onSocketClose(): void {
    clearTimeout(this.timer);
    this.closing = true;
    // A publish still waiting for the gate when the connection was cut ends as cut once it answers.
    if (this.cutReason !== undefined) this.publish?.finish('cut', this.cutReason);
    const how = this.reader.midMessage
      ? 'the publisher disconnected in the middle of a message'
      : 'the publisher disconnected';
    this.publish?.finish('left', how);
  }
}
