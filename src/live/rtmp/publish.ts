import type { FlvSink, PublishDecision, PublishGate, PublishRefusal } from '../ingest-types.ts';
import type { Logger } from '../../lib/log.ts';
import { FLV_HEADER, flvTag, scriptTagData, unreadableMedia } from './flv.ts';
import { MessageType, onStatus, type RtmpMessage, UserControlEvent, userControl } from './messages.ts';

// One publish on one connection: the gate decides before NetStream.Publish.Start is sent and
// before any media is read (the connection stops reading while `waiting`); once accepted,
// every audio, video and data message becomes an FLV tag in the sink, with backpressure.

export type EndKind = 'left' | 'cut' | 'refused';

export type RtmpLog = Pick<Logger, 'info' | 'warn'>;

export interface PublishOptions {
  streamId: number;
  /** A secret: handed to the gate, never logged. */
  streamKey: string;
  remote: string;
  connection: string;
  gate: PublishGate;
  log: RtmpLog;
  send(message: RtmpMessage): void;
  /** Cuts the connection off (the runtime's PublishAttempt.disconnect). */
  disconnect(reason: string): void;
  /** Closes the connection once what was sent has gone out. */
  close(): void;
  /** Reading may go on (the gate answered, the sink drained). */
  resume(): void;
}

export class Publish {
  private readonly o: PublishOptions;
  private state: 'pending' | 'live' | 'done' = 'pending';
  private sink: FlvSink | undefined;
  private draining = false;

  /** The message stream it publishes on. */
  readonly streamId: number;

  constructor(o: PublishOptions) {
    this.o = o;
    this.streamId = o.streamId;
    if (o.streamKey === '') {
      this.refuse({
        accepted: false,
        code: 'BadName',
        description: 'No stream key: publish to rtmp://HOST:PORT/live/STREAM_KEY',
      });
      return;
    }
    const attempt = {
      protocol: 'rtmp' as const,
      streamKey: o.streamKey,
      remote: o.remote,
      disconnect: (reason: string) => o.disconnect(reason),
    };
    o.gate(attempt).then(
      (decision) => this.decided(decision),
      (err: unknown) => {
        const reason = err instanceof Error ? err.message : String(err);
        o.log.warn({ remote: o.remote, connection: o.connection, reason }, 'rtmp: the publish gate failed');
        this.decided({
          accepted: false,
          code: 'Rejected',
          description: 'The server cannot take this stream now: try again',
        });
      },
    );
  }

  /** The connection must not read on: the gate has not answered, or the sink is full. */
  get waiting(): boolean {
    return this.state === 'pending' || (this.state === 'live' && this.draining);
  }

  /** Not yet ended: a second publish on the connection is refused meanwhile. */
  get active(): boolean {
    return this.state !== 'done';
  }

  media(message: RtmpMessage): void {
    const sink = this.sink;
    // An empty audio or video message is no FLV tag a demuxer wants.
    if (this.state !== 'live' || !sink || message.streamId !== this.o.streamId || message.payload.length === 0) return;
    const unreadable = unreadableMedia(message.typeId, message.payload);
    if (unreadable) {
      this.refuseMedia(unreadable);
      return;
    }
    const data = message.typeId === MessageType.DataAmf0 ? scriptTagData(message.payload) : message.payload;
    if (!sink.flv.write(flvTag(message.typeId, message.timestamp, data))) {
      this.draining = true;
      sink.flv.once('drain', () => {
        this.draining = false;
        this.o.resume();
      });
    }
  }

  /** The publish is over (once): the sink's FLV ends and the runtime hears why. */
  finish(kind: EndKind, reason: string): void {
    if (this.state === 'done') return;
    const sink = this.sink;
    this.state = 'done';
    this.draining = false;
    if (sink) endSink(sink, kind, reason);
    else this.endWhenDecided = { kind, reason };
  }

  /** A publisher that went away while the gate was deciding: an acceptance is ended at once. */
  private endWhenDecided: { kind: EndKind; reason: string } | undefined;

  private decided(decision: PublishDecision): void {
    if (this.state === 'done') {
      if (decision.accepted) {
        const why = this.endWhenDecided ?? { kind: 'left' as const, reason: 'the publisher disconnected' };
        endSink(decision.sink, why.kind, why.reason);
      }
      return;
    }
    if (!decision.accepted) {
      this.refuse(decision);
      return;
    }
    this.sink = decision.sink;
    this.state = 'live';
    // A sink that fails or closes while the publisher is live takes no more media: cut it off.
    decision.sink.flv.on('error', () => this.o.disconnect("the stream's media sink failed"));
    decision.sink.flv.on('close', () => {
      if (this.state === 'live') this.o.disconnect("the stream's media sink closed");
    });
    this.o.send(userControl(UserControlEvent.StreamBegin, this.o.streamId));
    this.o.send(this.status('status', 'NetStream.Publish.Start', 'Publishing.'));
    decision.sink.flv.write(FLV_HEADER);
    this.o.log.info({ remote: this.o.remote, connection: this.o.connection }, 'rtmp: publishing');
    this.o.resume();
  }

  private refuse(refusal: PublishRefusal): void {
    this.state = 'done';
    const { code, description } = refusal;
    this.o.log.info(
      { remote: this.o.remote, connection: this.o.connection, code, description },
      'rtmp: publish refused',
    );
    this.o.send(this.status('error', `NetStream.Publish.${code}`, description));
    this.o.close();
  }

  /** Media ffmpeg could not read: refused with words for the encoder's user, the connection closed. */
  private refuseMedia(description: string): void {
    this.o.log.warn({ remote: this.o.remote, connection: this.o.connection, description }, 'rtmp: media refused');
    this.o.send(this.status('error', 'NetStream.Publish.Rejected', description));
    this.finish('refused', description);
    this.o.close();
  }

  private status(level: 'status' | 'error', code: string, description: string): RtmpMessage {
    return onStatus({ streamId: this.o.streamId, level, code, description });
  }
}

function endSink(sink: FlvSink, kind: EndKind, reason: string): void {
  if (!sink.flv.writableEnded && !sink.flv.destroyed) sink.flv.end();
  sink.ended(kind, reason);
}
