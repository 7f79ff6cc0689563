import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, test, type TestContext } from 'node:test';
import type { FlvSink, PublishAttempt, PublishDecision } from '../../src/live/ingest-types.ts';
import { type SrtRelay, startSrtRelay } from '../../src/live/srt/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { ffprobe } from '../helpers/media.ts';

// The SRT relay with real ffmpeg publishers (libsrt callers) and a stand-in gate whose sinks
// write each publish's FLV to a file, as the live runtime's would read it.

const KEY = 'srtkey-0123456789abcdef';
const dir = await mkdtemp(path.join(tmpdir(), 'srt-relay-'));
after(() => rm(dir, { recursive: true, force: true }));

interface Ended {
  kind: string;
  reason: string;
  file: string;
}

interface Harness {
  relay: SrtRelay;
  attempts: PublishAttempt[];
  /** Each accepted publish's end, in the order they were accepted. */
  ends: Promise<Ended>[];
  logs: string[];
}

let files = 0;

/** A relay on a free port whose gate takes KEY (and refuses anything else as BadName). */
async function startRelay(t: TestContext, o: { idleTimeoutMs?: number } = {}): Promise<Harness> {
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
  const gate = async (attempt: PublishAttempt): Promise<PublishDecision> => {
    attempts.push(attempt);
    if (attempt.streamKey !== KEY) return { accepted: false, code: 'BadName', description: 'no stream has this key' };
    const file = path.join(dir, `publish-${++files}.flv`);
    let ended!: (e: Ended) => void;
    ends.push(new Promise((resolve) => (ended = resolve)));
    const sink: FlvSink = { flv: createWriteStream(file), ended: (kind, reason) => ended({ kind, reason, file }) };
    return { accepted: true, sink };
  };
  const relay = await startSrtRelay({
    host: '127.0.0.1',
    port: 0,
    log,
    gate,
    ffmpegPath: 'ffmpeg',
    idleTimeoutMs: o.idleTimeoutMs ?? 10_000,
  });
  t.after(() => relay.close());
  return { relay, attempts, ends, logs };
}

interface Publisher {
  child: ChildProcess;
  /** Exit code and stderr, once ffmpeg has exited. */
  exited: Promise<{ code: number | null; stderr: string }>;
}

/** ffmpeg publishing a generated 320x240 15 fps source (H.264 or HEVC, AAC) over SRT in real time. */
function publish(t: TestContext, o: { port: number; streamId: string; seconds: number; hevc?: boolean }): Publisher {
  const video = o.hevc
    ? ['-c:v', 'libx265', '-preset', 'ultrafast', '-x265-params', 'log-level=error:keyint=15']
    : ['-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-g', '15'];
  const child = spawn('ffmpeg', [
    ...['-hide_banner', '-nostdin', '-v', 'error', '-re'],
    ...['-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=15'],
    ...['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000'],
    ...['-t', String(o.seconds), ...video, '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-b:a', '64k'],
    ...['-f', 'mpegts', `srt://127.0.0.1:${o.port}?streamid=${encodeURIComponent(o.streamId)}`],
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
async function probeFlv(file: string): Promise<{ codecs: string[]; duration: number }> {
  const probed = await ffprobe(file);
  return {
    codecs: probed.streams.map((s) => s.codec_name).sort(),
    duration: Number(probed.format.duration ?? 0),
  };
}

/** Resolves once `file` has grown past `bytes` (the publish is flowing). */
async function grown(file: string, bytes: number): Promise<void> {
  for (;;) {
    const size = await stat(file).then(
      (s) => s.size,
      () => 0,
    );
    if (size > bytes) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('an SRT publish with the stream key arrives as FLV with both tracks and its duration', async (t) => {
  const h = await startRelay(t);
  const pub = publish(t, { port: h.relay.port, streamId: KEY, seconds: 4 });
  const { code, stderr } = await pub.exited;
  assert.equal(code, 0, stderr);
  const [end] = h.ends;
  assert.ok(end);
  const ended = await end;
  assert.deepEqual([ended.kind, ended.reason], ['left', 'the publisher closed the connection']);
  const flv = await probeFlv(ended.file);
  assert.deepEqual(flv.codecs, ['aac', 'h264']);
  assert.ok(flv.duration > 3.2 && flv.duration < 4.6, `duration ${flv.duration}`);
  assert.equal(h.attempts.length, 1);
  assert.equal(h.attempts[0]?.protocol, 'srt');
  assert.match(h.attempts[0]?.remote ?? '', /^127\.0\.0\.1:\d+$/);
  assert.equal(h.relay.remuxStarts, 1);
  assert.equal(h.relay.sessions, 0);
  assert.ok(!h.logs.join('').includes(KEY), 'the key is in a log line');
});
