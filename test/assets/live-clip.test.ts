// The `clip` task's handler on a live stream's session (spec/API.md section D): the range, in
// Unix milliseconds, read from the session's archive (a RecordingArchive) once the archive holds
// its end, cut frame-accurately at the wall-clock times asked, and made into an asset.
//
// The archive here is a small real one: a fragmented MP4 that ffmpeg wrote (frame-numbered
// picture, a keyframe every 2 s, a timeline that does not start at 0, as a live rendition's),
// whose first frame was shown at a wall-clock time the test chooses. The frames of each clip
// are read back exactly; its duration (the audio's too, whole AAC frames) within two frames.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { type AssetOutput, createClipHandler, type RecordingArchive } from '../../src/assets/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import { InputUnreadableError, InternalError } from '../../src/lib/errors.ts';
import { FolderStore } from '../../src/storage/builtin/folder.ts';
import type { JobContext } from '../../src/tasks/index.ts';
import { readFrameNumbers } from '../helpers/frame-numbers.ts';
import { frameCodeFilter } from '../helpers/live.ts';

const run = promisify(execFile);
const config = loadConfig({ env: {}, overrides: { x264Preset: 'ultrafast' } });
const FPS = 30;
const SECONDS = 10;
/** The wall clock of the archive's first frame (any time will do: the handler reads no clock for it). */
const T0 = Date.UTC(2026, 0, 2, 3, 4, 5, 600);
const SESSION = '0b6c3d6e-1f0a-4c55-9d7e-6b2f3a4c5d6e';
const ladder = { profiles: [{ name: '240p0', width: 320, height: 240, bitrate: 300_000 }] };

let dir: string;
let store: FolderStore;
let fmp4: string;

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mp-live-clip-'));
  store = new FolderStore(path.join(dir, 'media'));
  fmp4 = path.join(dir, 'archive.mp4');
  await run('ffmpeg', [
    ...['-v', 'error', '-f', 'lavfi', '-i', `testsrc2=size=320x240:rate=${FPS}`],
    ...['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', String(SECONDS)],
    ...['-vf', frameCodeFilter(320, 240), '-pix_fmt', 'yuv420p', '-c:v', 'libx264', '-preset', 'veryfast'],
    ...['-g', String(2 * FPS), '-keyint_min', String(2 * FPS), '-sc_threshold', '0', '-c:a', 'aac'],
    // A live rendition's timeline goes on from where the session was: not from 0.
    ...['-output_ts_offset', '5000', '-movflags', 'frag_keyframe+empty_moov+default_base_moof', fmp4],
  ]);
});
after(() => rm(dir, { recursive: true, force: true }));

/**
 * An archive holding the file (all of it, whatever range is asked) up to `until()`, as the
 * runs given (one by default); what it was asked, kept.
 */
function fileArchive(
  until: () => number | undefined,
  runs?: { wallStartMs: number; startSecs: number }[],
): RecordingArchive & { extracts: { fromMs?: number; toMs?: number; asked: number }[] } {
  const extracts: { fromMs?: number; toMs?: number; asked: number }[] = [];
  return {
    extracts,
    archivedUntil: async (sessionId) => (sessionId === SESSION ? until() : undefined),
    extract: async (o) => {
      const end = until();
      if (o.sessionId !== SESSION || end === undefined || (o.fromMs ?? 0) >= end) return undefined;
      extracts.push({
        ...(o.fromMs === undefined ? {} : { fromMs: o.fromMs }),
        ...(o.toMs === undefined ? {} : { toMs: o.toMs }),
        asked: Date.now(),
      });
      await copyFile(fmp4, o.dest);
      return { startWallMs: T0, durationSecs: SECONDS, ...(runs ? { runs } : {}) };
    },
  };
}

let runs = 0;
async function context(): Promise<JobContext> {
  return {
    taskId: `t${++runs}`,
    attempt: 1,
    signal: AbortSignal.timeout(120_000),
    scratchDir: await mkdtemp(path.join(dir, 'scratch-')),
    progress: () => {},
    log: pino({ level: 'silent' }),
  };
}

const playbackIdOf = (n: number) => `liveclip${String(n).padStart(8, '0')}`;
const params = (n: number, range: { startTime: number; endTime: number }) => ({
  assetId: `5f7e2b1a-0000-4000-8000-00000000000${n}`,
  playbackId: playbackIdOf(n),
  live: { sessionId: SESSION, playbackId: 'streamplayback01', ...range },
  ...ladder,
});

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('the clip handler on a live session', () => {
  it('cuts the wall-clock range from the archive: seconds 3.5 to 6.5 are frames 105 to 194', async () => {
    const archive = fileArchive(() => T0 + SECONDS * 1000);
    const handler = createClipHandler({ config, store, archive });
    const out = (await handler(
      params(1, { startTime: T0 + 3500, endTime: T0 + 6500 }),
      await context(),
    )) as AssetOutput;
    assert.ok(Math.abs((out.videoSpec.duration ?? 0) - 3) < 2 / FPS, `duration ${out.videoSpec.duration}`);
    assert.deepEqual(
      archive.extracts.map(({ fromMs, toMs }) => ({ fromMs, toMs })),
      [{ fromMs: T0 + 3500, toMs: T0 + 6500 }],
    );
    // The clip kept as the new asset's source: every frame of the range, none other.
    assert.deepEqual(await readFrameNumbers(path.join(dir, 'media', out.source.key)), range(105, 194));
  });

  it('waits for the archive to hold the range end, then clips', async () => {
    const started = Date.now();
    const until = () => Math.min(T0 + SECONDS * 1000, T0 + 4000 + (Date.now() - started) * 4);
    const archive = fileArchive(until);
    const handler = createClipHandler({ config, store, archive });
    const out = (await handler(
      params(2, { startTime: T0 + 2000, endTime: T0 + 8000 }),
      await context(),
    )) as AssetOutput;
    const first = archive.extracts[0];
    assert.ok(first, 'the archive was read');
    // Archived to 8 s once 1 s had passed (4 s + 4x the time spent): never read before that.
    assert.ok(first.asked - started >= 1000, `read after ${first.asked - started} ms`);
    assert.ok(Math.abs((out.videoSpec.duration ?? 0) - 6) < 2 / FPS, `duration ${out.videoSpec.duration}`);
  });

  it('a range past the archive end when the wait is over: cut at the end', async () => {
    const archive = fileArchive(() => T0 + SECONDS * 1000);
    const handler = createClipHandler({ config, store, archive, liveClipWaitMs: 300 });
    const out = (await handler(
      params(3, { startTime: T0 + 8000, endTime: T0 + 12_000 }),
      await context(),
    )) as AssetOutput;
    assert.ok(Math.abs((out.videoSpec.duration ?? 0) - 2) < 2 / FPS, `duration ${out.videoSpec.duration}`);
    assert.deepEqual(await readFrameNumbers(path.join(dir, 'media', out.source.key)), range(240, 299));
  });

  it('a range across a reconnect: the gap between the runs is not in the file', async () => {
    // The publisher sent 5 s, was away 20 s, then sent 5 s more: the file holds the 10 s sent.
    const back = T0 + 25_000;
    const runs = [
      { wallStartMs: T0, startSecs: 0 },
      { wallStartMs: back, startSecs: 5 },
    ];
    const archive = fileArchive(() => back + 5000, runs);
    const handler = createClipHandler({ config, store, archive });
    const out = (await handler(
      params(6, { startTime: T0 + 3000, endTime: back + 1000 }),
      await context(),
    )) as AssetOutput;
    assert.deepEqual(await readFrameNumbers(path.join(dir, 'media', out.source.key)), range(90, 179));
    assert.ok(Math.abs((out.videoSpec.duration ?? 0) - 3) < 2 / FPS, `duration ${out.videoSpec.duration}`);
  });

  it('nothing archived in the range: a failure naming the range, not retried', async () => {
    const handler = createClipHandler({ config, store, archive: fileArchive(() => undefined), liveClipWaitMs: 300 });
    const err = await handler(params(4, { startTime: T0 + 1000, endTime: T0 + 2000 }), await context()).then(
      () => assert.fail('the clip was made'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof InputUnreadableError, String(err));
    assert.match(
      err.message,
      /nothing of the stream is kept from 2026-01-02T03:04:06\.600Z to 2026-01-02T03:04:07\.600Z/,
    );
    assert.equal(err.retryable, false);
  });

  it('a worker without the live archive says so', async () => {
    const handler = createClipHandler({ config, store });
    const err = await handler(params(5, { startTime: T0, endTime: T0 + 1000 }), await context()).then(
      () => assert.fail('the clip was made'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof InternalError, String(err));
    assert.match(err.message, /no live archive/);
  });
});
