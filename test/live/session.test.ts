import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { PublishAttempt } from '../../src/live/ingest-types.ts';
import type { Profile } from '../../src/live/profiles.ts';
import { LiveSession } from '../../src/live/session.ts';
import type { LiveCounters, StreamRecord } from '../../src/live/types.ts';
import { createLogger } from '../../src/lib/log.ts';
import { cachedMedia } from '../helpers/media-cache.ts';
import { LogCapture, waitFor } from '../helpers/server.ts';

// One publish's session without a server: FLV written into its sink as a listener would, a
// store that keeps what it is told, ffmpeg real (or wrapped to misbehave).

const run = promisify(execFile);
const dir = await mkdtemp(path.join(tmpdir(), 'live-session-'));
after(() => rm(dir, { recursive: true, force: true }));

/** An FLV of `seconds` at 320x240, 15 fps, keyframes every `gop` frames, with AAC. */
function flv(seconds: number, gop: number): Promise<string> {
  return cachedMedia(`live-session-${seconds}s-g${gop}.flv`, async (out) => {
    await run('ffmpeg', [
      ...[
        '-hide_banner',
        '-v',
        'error',
        '-y',
        '-f',
        'lavfi',
        '-i',
        `testsrc2=size=320x240:rate=15:duration=${seconds}`,
      ],
      ...[
        '-f',
        'lavfi',
        '-i',
        `sine=duration=${seconds}`,
        '-c:v',
        'libx264',
        '-preset',
        'ultrafast',
        '-g',
        String(gop),
      ],
      ...['-pix_fmt', 'yuv420p', '-c:a', 'aac', '-f', 'flv', out],
    ]);
  });
}

/** An ffmpeg that does what `body` says with the real one's arguments ("$@"). */
async function ffmpegWrapper(name: string, body: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, `#!/bin/sh\n${body}\n`);
  await chmod(file, 0o755);
  return file;
}

const RUNGS: Profile[] = [
  { name: '120p0', width: 160, height: 120, bitrate: 100_000, fps: 0 },
  { name: '160p0', width: 214, height: 160, bitrate: 150_000, fps: 0 },
];

interface Harness {
  session: LiveSession;
  reports: LiveCounters[];
  idle: Promise<void>;
  cut: string[];
  ladders: number;
  logs: LogCapture;
}

function startSession(o: { ffmpegPath?: string; profiles: Profile[] | null }): Harness {
  const reports: LiveCounters[] = [];
  const cut: string[] = [];
  const logs = new LogCapture();
  let idled = (): void => {};
  const idle = new Promise<void>((r) => {
    idled = r;
  });
  const attempt: PublishAttempt = {
    protocol: 'rtmp',
    streamKey: 'secret-key-of-the-test',
    remote: '127.0.0.1:5000',
    disconnect: (reason) => {
      cut.push(reason);
      // The listener's answer to a cut: the publish ends.
      setImmediate(() => h.session.ended('cut', reason));
    },
  };
  const stream = { id: 's1', playbackId: 'p1', profiles: o.profiles } as StreamRecord;
  const h: Harness = {
    reports,
    idle,
    cut,
    ladders: 0,
    logs,
    session: new LiveSession({
      stream,
      sessionId: 'session-1',
      attempt,
      ffmpegPath: o.ffmpegPath ?? 'ffmpeg',
      timing: { segmentSecs: 1, partSecs: 0.25, windowSecs: 30 },
      store: {
        report: async (_id, c) => void reports.push(c),
        idle: async () => idled(),
        end: async () => undefined,
      },
      log: createLogger({ level: 'info', destination: logs }),
      onLadderStart: () => h.ladders++,
      onCost: () => {},
      onEnd: () => {},
      reportEveryMs: 250,
    }),
  };
  after(() => h.session.close('test over'));
  return h;
}

/** Writes an FLV into the sink at `speed` times real time (by its 15 fps frames), as a publisher would. */
async function feed(
  session: LiveSession,
  file: string,
  o: { seconds: number; speed: number; until?: () => boolean },
): Promise<void> {
  const bytes = await readFile(file);
  const pieces = Math.ceil(o.seconds * 15);
  const size = Math.ceil(bytes.length / pieces);
  for (let at = 0; at < bytes.length && !o.until?.(); at += size) {
    if (!session.flv.write(bytes.subarray(at, at + size))) await new Promise((r) => session.flv.once('drain', r));
    await sleep(1000 / 15 / o.speed);
  }
}

test('a source with keyframes 3 s apart is not offered, and its issue says what to set', async () => {
  const h = startSession({ profiles: [RUNGS[0] as Profile] });
  await feed(h.session, await flv(6, 45), { seconds: 6, speed: 4 });
  h.session.ended('left', 'the publisher left');
  await h.idle;
  const last = h.reports.at(-1);
  assert.ok(last);
  assert.match(last.issues.join('\n'), /keyframes are 3\.0 s apart .* set the encoder's keyframe interval to 1 or 2 s/);
  assert.ok(last.transcodedSegments >= 4, JSON.stringify(last));
  assert.deepEqual(
    h.session.renditions().map((r) => r.name),
    ['120p0'],
  );
});

test('a ladder that falls behind real time restarts without its top rung and says so', async () => {
  // ffmpeg reading at half the input's own rate (-readrate 0.5): behind real time, for good.
  const slow = await ffmpegWrapper('slow-ffmpeg', 'exec ffmpeg -readrate 0.5 "$@"');
  const h = startSession({ ffmpegPath: slow, profiles: RUNGS });
  await feed(h.session, await flv(14, 15), { seconds: 14, speed: 2, until: () => h.ladders > 1 });
  // The reports come by a timer: wait for the one that says so, not a fixed while.
  const said = (): boolean => h.reports.some((r) => r.issues.some((i) => /160p0 was dropped to keep up/.test(i)));
  await waitFor(async () => said(), 10_000, 'the dropped-rung report').catch(() => undefined);
  const issues = h.reports.flatMap((r) => r.issues);
  assert.ok(said(), issues.join('\n'));
  assert.ok(
    h.reports.some((r) => !r.isHealthy),
    'unhealthy while behind',
  );
  assert.equal(h.ladders, 2, 'one restart, without the top rung');
  assert.deepEqual(
    h.session.renditions().map((r) => r.name),
    ['120p0', 'source'],
  );
  h.session.ended('left', 'done');
  await h.idle;
});

test('a ladder ffmpeg that dies cuts the publisher off with an issue; a refused publish leaves its reason', async () => {
  const dying = await ffmpegWrapper('dying-ffmpeg', 'echo "Conversion failed! (a test)" >&2; exit 1');
  const h = startSession({ ffmpegPath: dying, profiles: [RUNGS[0] as Profile] });
  await feed(h.session, await flv(6, 15), { seconds: 1, speed: 4 });
  await h.idle;
  assert.equal(h.cut.length, 1);
  assert.match(h.cut[0] ?? '', /the live transcoder stopped \(exit 1: Conversion failed! \(a test\)\)/);
  assert.match(h.reports.at(-1)?.issues.join('\n') ?? '', /the live transcoder stopped/);
  assert.ok(!h.logs.text.includes('secret-key-of-the-test'));

  const refused = startSession({ profiles: null });
  refused.session.ended('refused', 'HEVC over RTMP is not supported: send H.264 (x264 or NVENC H.264)');
  await refused.idle;
  assert.deepEqual(refused.reports.at(-1)?.issues, [
    'HEVC over RTMP is not supported: send H.264 (x264 or NVENC H.264)',
  ]);
  assert.equal(refused.ladders, 0);
  assert.match(refused.logs.text, /HEVC over RTMP is not supported/);
});

test('bytes that are not FLV cut the publisher off before any ladder starts', async () => {
  const h = startSession({ profiles: null });
  h.session.flv.write(Buffer.from('this is not an FLV stream at all'));
  await h.idle;
  assert.equal(h.ladders, 0);
  assert.match(h.cut[0] ?? '', /the publisher sent media that cannot be read \(the stream is not FLV/);
});
