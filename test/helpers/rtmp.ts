// RTMP test equipment: a gate that records what each publish was told and wrote (the FLV in
// memory), a scripted publisher that speaks RTMP byte by byte (for what ffmpeg 5.1 cannot send:
// enhanced RTMP, garbage after a valid publish, a stall), and an ffmpeg publisher.

import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { Writable } from 'node:stream';
import { type Amf0Value, encodeAmf0 } from '../../src/live/amf0.ts';
import type { PublishAttempt, PublishGate, PublishRefusal } from '../../src/live/ingest-types.ts';
import { ChunkReader } from '../../src/live/rtmp/chunk-reader.ts';
import { writeChunks } from '../../src/live/rtmp/chunk-writer.ts';
import { type RtmpCommand, type RtmpMessage, readCommand } from '../../src/live/rtmp/messages.ts';
import { createLogger, type Logger } from '../../src/lib/log.ts';
import { LogCapture } from './server.ts';

/** One publish the gate saw: what it was told, the FLV it got, and how it ended. */
export interface RecordedPublish {
  attempt: PublishAttempt;
  accepted: boolean;
  chunks: Buffer[];
  flv(): Buffer;
  ended?: { kind: 'left' | 'cut' | 'refused'; reason: string };
  /** Resolves when the listener has called `ended`. */
  done: Promise<void>;
}

export interface RecordingGate {
  gate: PublishGate;
  publishes: RecordedPublish[];
  /** The publish the n-th attempt made, once the gate has seen it. */
  nth(n: number): Promise<RecordedPublish>;
}

/** A gate that accepts a key when `decide` says so (true) or refuses as it says; sinks collect the FLV. */
export function recordingGate(
  decide: (key: string) => true | PublishRefusal,
  sinkOptions: { highWaterMark?: number; writeDelayMs?: number } = {},
): RecordingGate {
  const publishes: RecordedPublish[] = [];
  const waiters: (() => void)[] = [];
  const gate: PublishGate = async (attempt) => {
    const decision = decide(attempt.streamKey);
    let finish = (): void => {};
    const rec: RecordedPublish = {
      attempt,
      accepted: decision === true,
      chunks: [],
      flv: () => Buffer.concat(rec.chunks),
      done: new Promise<void>((resolve) => {
        finish = resolve;
      }),
    };
    publishes.push(rec);
    for (const w of waiters.splice(0)) w();
    if (decision !== true) return decision;
    const flv = new Writable({
      highWaterMark: sinkOptions.highWaterMark ?? 16384,
      write(chunk: Buffer, _enc, cb) {
        rec.chunks.push(chunk);
        if (sinkOptions.writeDelayMs) setTimeout(cb, sinkOptions.writeDelayMs);
        else cb();
      },
    });
    return {
      accepted: true,
      sink: {
        flv,
        ended(kind, reason) {
          if (rec.ended) throw new Error('ended twice');
          rec.ended = { kind, reason };
          finish();
        },
      },
    };
  };
  const nth = async (n: number): Promise<RecordedPublish> => {
    while (publishes.length <= n) await new Promise<void>((resolve) => waiters.push(resolve));
    const rec = publishes[n];
    if (!rec) throw new Error('no publish');
    return rec;
  };
  return { gate, publishes, nth };
}

/** The service's logger writing into a LogCapture (to assert what was logged, and that no key was). */
export function captureLog(): { log: Logger; lines: LogCapture } {
  const lines = new LogCapture();
  return { log: createLogger({ level: 'info', destination: lines }), lines };
}

/** A publisher scripted message by message. */
export class ScriptedPublisher {
  readonly socket: net.Socket;
  private readonly reader = new ChunkReader();
  /** Every message the server sent, in order. */
  readonly received: RtmpMessage[] = [];
  private commandCursor = 0;
  private wake: (() => void) | undefined;
  readonly closed: Promise<void>;
  chunkSize = 128;
  /** The handshake: what this client sent (C1) and the server's S1 and S2. */
  c1 = Buffer.alloc(0);
  s1 = Buffer.alloc(0);
  s2 = Buffer.alloc(0);

  private constructor(socket: net.Socket) {
    this.socket = socket;
    this.closed = once(socket, 'close').then(() => {});
    socket.on('error', () => {});
  }

  /** Connects and does the plain handshake (C0, C1; reads S0, S1, S2; sends C2). */
  static async connect(port: number, o: { c1Version?: number[] } = {}): Promise<ScriptedPublisher> {
    const socket = net.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    const client = new ScriptedPublisher(socket);
    const c1 = Buffer.alloc(1536, 7);
    // A Flash client's C1 names its version in bytes 4-7 and hides a digest in the rest.
    Buffer.from(o.c1Version ?? [0, 0, 0, 0]).copy(c1, 4);
    client.c1 = c1;
    socket.write(Buffer.concat([Buffer.of(3), c1]));
    let got = Buffer.alloc(0);
    while (got.length < 1 + 2 * 1536) {
      const [chunk] = (await once(socket, 'data')) as [Buffer];
      got = Buffer.concat([got, chunk]);
    }
    client.s1 = got.subarray(1, 1537);
    client.s2 = got.subarray(1537, 1 + 2 * 1536);
    socket.write(client.s1);
    const rest = got.subarray(1 + 2 * 1536);
    client.received.push(...client.reader.push(rest));
    socket.on('data', (chunk: Buffer) => {
      client.received.push(...client.reader.push(chunk));
      client.wake?.();
    });
    return client;
  }

  send(message: Omit<RtmpMessage, 'chunkStreamId'> & { chunkStreamId?: number }): void {
    this.socket.write(writeChunks({ chunkStreamId: 4, ...message }, this.chunkSize));
  }

  command(name: string, transactionId: number, object: Amf0Value, ...args: Amf0Value[]): void {
    const streamId = name === 'publish' ? 1 : 0;
    this.send({
      chunkStreamId: 3,
      timestamp: 0,
      typeId: 20,
      streamId,
      payload: encodeAmf0(name, transactionId, object, ...args),
    });
  }

  /** The next command the server sends (other messages passed over); undefined once it closed. */
  async nextCommand(): Promise<RtmpCommand | undefined> {
    const at = await this.find((m) => m.typeId === 20, this.commandCursor);
    if (at === undefined) return undefined;
    this.commandCursor = at + 1;
    const m = this.received[at];
    return m && readCommand(m);
  }

  /** The index in `received` of the first message from `from` on that `match`es, waiting for it; undefined once closed. */
  async find(match: (m: RtmpMessage) => boolean, from = 0): Promise<number | undefined> {
    for (let i = from; ; i++) {
      while (i >= this.received.length) {
        if (this.socket.destroyed || this.socket.readableEnded) return undefined;
        const closed = this.closed.then(() => 'closed' as const);
        const more = new Promise<'more'>((resolve) => {
          this.wake = () => resolve('more');
        });
        if ((await Promise.race([closed, more])) === 'closed' && i >= this.received.length) return undefined;
      }
      const m = this.received[i];
      if (m && match(m)) return i;
    }
  }

  /** connect, createStream, publish; resolves with the onStatus info object. */
  async publish(key: string, app = 'live'): Promise<Record<string, Amf0Value> | undefined> {
    this.command('connect', 1, { app, tcUrl: `rtmp://127.0.0.1/${app}`, type: 'nonprivate' });
    const connected = await this.nextCommand();
    if (connected?.name !== '_result') return connected?.args[0] as Record<string, Amf0Value> | undefined;
    this.command('createStream', 2, null);
    await this.nextCommand();
    this.command('publish', 3, null, key, 'live');
    const status = await this.nextCommand();
    return status?.args[0] as Record<string, Amf0Value> | undefined;
  }
}

/** ffmpeg publishing `seconds` of a 320x240 H.264 + AAC test source to `url`. */
export function ffmpegPublish(url: string, seconds: number, extra: string[] = []): FfmpegRun {
  const args = [
    ...['-hide_banner', '-nostdin', '-loglevel', 'error', '-re'],
    ...['-f', 'lavfi', '-i', `testsrc2=size=320x240:rate=30:duration=${seconds}`],
    ...['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=44100:duration=${seconds}`],
    ...['-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-g', '30', '-pix_fmt', 'yuv420p'],
    ...['-c:a', 'aac', '-b:a', '64k', ...extra, '-f', 'flv', url],
  ];
  const child = spawn('ffmpeg', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, exited, stderr: () => stderr };
}

export interface FfmpegRun {
  child: ChildProcess;
  exited: Promise<number | null>;
  stderr(): string;
}

/** Kills what is still running (tests call it in `after` and `finally`). */
export function killAll(runs: FfmpegRun[]): void {
  for (const r of runs) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
}
