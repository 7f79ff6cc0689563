import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, type TestContext } from 'node:test';
import type { FlvSink, PublishAttempt, PublishDecision } from '../../src/live/ingest-types.ts';
import { type SrtRelay, startSrtRelay } from '../../src/live/srt/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { ffprobe } from '../helpers/media.ts';

// Test equipment of the SRT relay's tests: a relay with a stand-in gate whose sinks write each
// publish's FLV to a file (as the live runtime would read it), and real ffmpeg publishers
// (libsrt callers).

export const KEY = 'srtkey-0123456789abcdef';
const dir = await mkdtemp(path.join(tmpdir(), 'srt-relay-'));
after(() => rm(dir, { recursive: true, force: true }));

export interface Ended {
  kind: string;
  reason: string;
  file: string;
}

export interface Harness {
  relay: SrtRelay;
  attempts: PublishAttempt[];
  /** Each accepted publish's end, in the order they were accepted. */
  ends: Promise<Ended>[];
  /** Each accepted publish's FLV file, in the same order. */
  flvFiles: string[];
  logs: string[];
  /** How many remux ffmpegs were started, counted by a wrapper around the ffmpeg command. */
  remuxProcesses(): Promise<number>;
}

let files = 0;

/** A relay on a free port whose gate takes KEY (and refuses anything else as BadName). */
export async function startRelay(
  t: TestContext,
  o: { idleTimeoutMs?: number; maxPending?: number; gateDelayMs?: number; ffmpeg?: string } = {},
): Promise<Harness> {
  const logs: string[] = [];
  const log = createLogger({
    level: 'info',
    destination: new Writable({
      write(chunk, _enc, cb) {
        logs.push(String(chunk));
        cb();
      },
    }),
  });
  const attempts: PublishAttempt[] = [];
  const ends: Promise<Ended>[] = [];
  const flvFiles: string[] = [];
  const gate = async (attempt: PublishAttempt): Promise<PublishDecision> => {
    attempts.push(attempt);
    if (o.gateDelayMs) await new Promise((r) => setTimeout(r, o.gateDelayMs));
    if (attempt.streamKey !== KEY) return { accepted: false, code: 'BadName', description: 'no stream has this key' };
    const file = path.join(dir, `publish-${++files}.flv`);
    flvFiles.push(file);
    let ended!: (e: Ended) => void;
    ends.push(new Promise((resolve) => (ended = resolve)));
    const sink: FlvSink = { flv: createWriteStream(file), ended: (kind, reason) => ended({ kind, reason, file }) };
    return { accepted: true, sink };
  };
  const counted = await countingFfmpeg(o.ffmpeg ?? 'exec ffmpeg "$@"');
  const relay = await startSrtRelay({
    host: '127.0.0.1',
    port: 0,
    log,
    gate,
    ffmpegPath: counted.path,
    idleTimeoutMs: o.idleTimeoutMs ?? 10_000,
    ...(o.maxPending ? { maxPending: o.maxPending } : {}),
  });
  t.after(() => relay.close());
  return { relay, attempts, ends, flvFiles, logs, remuxProcesses: counted.starts };
}

/** An ffmpeg command that notes each start in a file before it runs `body` (ffmpeg itself, or a stand-in). */
async function countingFfmpeg(body: string): Promise<{ path: string; starts(): Promise<number> }> {
  const id = ++files;
  const script = path.join(dir, `ffmpeg-${id}.sh`);
  const starts = path.join(dir, `ffmpeg-${id}.starts`);
  await writeFile(script, `#!/bin/sh\necho started >> '${starts}'\n${body}\n`, { mode: 0o755 });
  return {
    path: script,
    starts: () =>
      readFile(starts, 'utf8').then(
        (text) => text.split('\n').filter(Boolean).length,
        () => 0,
      ),
  };
}

export interface Publisher {
  child: ChildProcess;
  /** Exit code and stderr, once ffmpeg has exited. */
  exited: Promise<{ code: number | null; stderr: string }>;
}

/** ffmpeg publishing a generated 320x240 15 fps source (H.264 or HEVC, AAC) over SRT in real time. */
export function publish(
  t: TestContext,
  o: { port: number; streamId: string; seconds: number; hevc?: boolean; passphrase?: string },
): Publisher {
  const video = o.hevc
    ? ['-c:v', 'libx265', '-preset', 'ultrafast', '-x265-params', 'log-level=error:keyint=15']
    : ['-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-g', '15'];
  const child = spawn('ffmpeg', [
    ...['-hide_banner', '-nostdin', '-v', 'error', '-re'],
    ...['-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=15'],
    ...['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000'],
    ...['-t', String(o.seconds), ...video, '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-b:a', '64k'],
    // As an option: ffmpeg 5.1 takes a URL's streamid literally, without percent-decoding it.
    ...(o.passphrase ? ['-passphrase', o.passphrase] : []),
    ...['-srt_streamid', o.streamId, '-f', 'mpegts', `srt://127.0.0.1:${o.port}`],
  ]);
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const exited = new Promise<{ code: number | null; stderr: string }>((resolve) =>
    child.on('close', (code) => resolve({ code, stderr })),
  );
  t.after(() => child.kill('SIGKILL'));
  return { child, exited };
}

/** The codecs and duration of a written FLV. */
export async function probeFlv(file: string): Promise<{ codecs: string[]; duration: number }> {
  const probed = await ffprobe(file);
  return {
    codecs: probed.streams.map((s) => s.codec_name).sort(),
    duration: Number(probed.format.duration ?? 0),
  };
}

/** Resolves once the `index`th publish's FLV has grown past `bytes` (the publish is flowing). */
export async function flowing(h: Harness, index: number, bytes: number): Promise<void> {
  for (;;) {
    const file = h.flvFiles[index];
    const size = await (file ? stat(file) : Promise.reject(new Error('not yet'))).then(
      (s) => s.size,
      () => 0,
    );
    if (size > bytes) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
