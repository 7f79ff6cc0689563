import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { LiveAdmission, ladderCores } from '../../src/live/admission.ts';
import { planLiveLadder } from '../../src/live/ladder.ts';
import { LadderProcess } from '../../src/live/ladder-process.ts';
import { LiveRendition } from '../../src/live/llhls/index.ts';
import { DEFAULT_LIVE_PROFILES, rungsFor } from '../../src/live/profiles.ts';
import { cachedMedia } from '../helpers/media-cache.ts';

const run = promisify(execFile);
const timing = { segmentSecs: 1, partSecs: 0.25 };
const h264 = { videoCodec: 'h264', audioCodec: 'aac', width: 640, height: 360, fps: 30 };

/** The value after `flag` in each output's options. */
function valuesOf(args: readonly string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1] ?? ''] : []));
}

test('the ladder: rungs up to the source, x264 for live, keyframes at segment starts, one fMP4 pipe each, the source copied', () => {
  const plan = planLiveLadder({ rungs: rungsFor(null, h264), source: h264, timing });
  assert.deepEqual(
    plan.renditions.map((r) => [r.name, r.fd, r.width, r.height]),
    [
      ['240p0', 3, 426, 240],
      ['360p0', 4, 640, 360],
      ['source', 5, 640, 360],
    ],
  );
  const { args } = plan;
  assert.deepEqual(valuesOf(args, '-i'), ['pipe:0']);
  assert.deepEqual(valuesOf(args, '-protocol_whitelist'), ['pipe']);
  assert.deepEqual(valuesOf(args, '-c:v'), ['libx264', 'libx264', 'copy']);
  assert.deepEqual(valuesOf(args, '-tune'), ['zerolatency', 'zerolatency']);
  assert.deepEqual(valuesOf(args, '-sc_threshold'), ['0', '0']);
  assert.deepEqual(valuesOf(args, '-force_key_frames'), ['expr:gte(t,n_forced*1)', 'expr:gte(t,n_forced*1)']);
  assert.deepEqual(valuesOf(args, '-g'), ['30', '30']);
  assert.deepEqual(valuesOf(args, '-c:a'), ['copy', 'copy', 'copy']);
  assert.deepEqual(valuesOf(args, '-frag_duration'), ['250000', '250000', '250000']);
  assert.deepEqual(
    args.filter((a) => /^pipe:[1-9]/.test(a)),
    ['pipe:3', 'pipe:4', 'pipe:5'],
  );
  assert.deepEqual(valuesOf(args, '-b:v'), ['250k', '800k']);
});

test('the ladder of other sources: MP3 audio encoded to AAC, a 4:3 source keeps its shape, [] is the source alone', () => {
  const mp3 = planLiveLadder({ rungs: rungsFor(null, h264), source: { ...h264, audioCodec: 'mp3' }, timing });
  assert.deepEqual(valuesOf(mp3.args, '-c:a'), ['aac', 'aac', 'aac']);
  const square = { videoCodec: 'h264', audioCodec: 'aac', width: 320, height: 240, fps: 15 };
  const small = planLiveLadder({ rungs: rungsFor(null, square), source: square, timing });
  assert.deepEqual(
    small.renditions.map((r) => [r.name, r.width, r.height]),
    [
      ['240p0', 320, 240],
      ['source', 320, 240],
    ],
  );
  assert.deepEqual(valuesOf(small.args, '-g'), ['15']);
  const alone = planLiveLadder({ rungs: rungsFor([], h264), source: h264, timing });
  assert.deepEqual(
    alone.renditions.map((r) => r.name),
    ['source'],
  );
  assert.equal(alone.args.includes('-filter_complex'), false);
  // A source that cannot be copied is encoded at its own size when it is all there is.
  const vp6 = planLiveLadder({ rungs: [], source: { ...h264, videoCodec: 'vp6' }, timing });
  assert.deepEqual(
    vp6.renditions.map((r) => [r.name, r.width, r.height]),
    [['source', 640, 360]],
  );
  assert.deepEqual(valuesOf(vp6.args, '-c:v'), ['libx264']);
});

test('admission: the cost model from pixels per second, the stream cap and the CPU, with reasons', () => {
  // The default ladder of a 720p30 source: about 1.5 cores (measured 1.41-1.60).
  const full = ladderCores(DEFAULT_LIVE_PROFILES, { width: 1280, height: 720, fps: 30 });
  assert.ok(full > 1.3 && full < 1.7, `${full}`);
  // Before the source is known it is taken as large as the top rung.
  assert.equal(ladderCores(DEFAULT_LIVE_PROFILES), full);
  const small = ladderCores([DEFAULT_LIVE_PROFILES[0]!], { width: 320, height: 240, fps: 15 });
  assert.ok(small < 0.1, `${small}`);

  const node = new LiveAdmission({ capacity: 2, maxStreams: 3 });
  assert.deepEqual(node.admit('a', full), { admitted: true });
  const refused = node.admit('b', full);
  assert.equal(refused.admitted, false);
  assert.match(
    refused.admitted ? '' : refused.reason,
    /^this node has no CPU left for another ladder: 1 streams live, their ladders take 1\.\d+ of 2 cores and this one needs 1\.\d+/,
  );
  assert.deepEqual(node.admit('c', small), { admitted: true });
  node.update('a', 0.5);
  assert.deepEqual(node.admit('d', small), { admitted: true });
  const capped = node.admit('e', small);
  assert.match(capped.admitted ? '' : capped.reason, /at most 3 live streams/);
  node.release('a');
  assert.deepEqual(node.admit('e', small), { admitted: true });
  // A ladder larger than the node runs when it is alone (it drops rungs when behind).
  const alone = new LiveAdmission({ capacity: 1, maxStreams: 3 });
  assert.deepEqual(alone.admit('big', full), { admitted: true });
});

test('the ladder ffmpeg turns FLV into LL-HLS renditions whose segments start at keyframes every second', async () => {
  const flv = await cachedMedia('live-ladder-src-320x240-6s.flv', async (out) => {
    await run('ffmpeg', [
      ...['-hide_banner', '-v', 'error', '-y'],
      ...['-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=15:duration=6', '-f', 'lavfi', '-i', 'sine=duration=6'],
      // Keyframes 3 s apart at the source: the ladder's must still come every second.
      ...[
        '-c:v',
        'libx264',
        '-preset',
        'ultrafast',
        '-g',
        '45',
        '-pix_fmt',
        'yuv420p',
        '-c:a',
        'aac',
        '-f',
        'flv',
        out,
      ],
    ]);
  });
  const source = { videoCodec: 'h264', audioCodec: 'aac', width: 320, height: 240, fps: 15 };
  const plan = planLiveLadder({ rungs: rungsFor(null, source), source, timing });
  const renditions = new Map(
    plan.renditions.map((r) => [
      r.fd,
      new LiveRendition({ name: r.name, timing: { partTargetSecs: 0.25, segmentTargetSecs: 1, windowSecs: 30 } }),
    ]),
  );
  const exit = new Promise<number | null>((resolve) => {
    const ladder = new LadderProcess({
      ffmpegPath: 'ffmpeg',
      args: plan.args,
      fds: [...renditions.keys()],
      onOutput: (fd, chunk) => renditions.get(fd)?.write(chunk),
      onExit: (e) => resolve(e.code),
    });
    void readFile(flv).then((bytes) => ladder.write(bytes, () => void ladder.finish(10_000)));
  });
  assert.equal(await exit, 0);
  const [rung, copy] = [...renditions.values()].map((r) => r.stats());
  assert.ok(rung && copy);
  assert.equal(rung.width, 320);
  assert.match(rung.codecs ?? '', /^avc1\.\w{6},mp4a\.40\.2$/);
  assert.ok(rung.segments >= 4, `segments ${rung.segments}`);
  assert.ok(rung.maxSegmentSecs <= 1.1, `the rung's longest segment: ${rung.maxSegmentSecs}`);
  // The copied source keeps its own keyframes: 3 s segments (so it would not be listed).
  assert.ok(copy.maxSegmentSecs >= 2.9, `the source's longest segment: ${copy.maxSegmentSecs}`);
});
