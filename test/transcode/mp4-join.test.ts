// Joining MP4 parts in Node (src/transcode/outputs/mp4-join.ts), against real ffmpeg: three
// chunk-like video parts with B-frames and the audio's `.m4a` part(s) make one faststart MP4
// whose packets (pts, dts, duration, flags, size, bytes) are those of ffmpeg's concat demuxer
// + faststart remux for every track, that decodes to the same frames, keeps the tracks'
// languages, interleaves video and audio, and refuses parts it cannot join.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { joinMp4s } from '../../src/transcode/outputs/mp4-join.ts';
import { startBrowserPlayer } from '../helpers/browser.ts';
import { startHttp } from '../helpers/http-input.ts';
import { moovBeforeMdat } from '../helpers/media.ts';
import { makeTracksClip } from '../helpers/media-tracks.ts';
import { serveRanges } from '../helpers/seams.ts';

const run = promisify(execFile);
let dir: string;
let source: string;
/** The video parts: 2 s each, encoded as a chunk is (its own window's frames, from pts 0). */
let video: string[];
let audio: string;

// biome-ignore format: the arguments read as flag-value pairs
async function videoPart(o: { index: number; secs: number; size?: string }): Promise<string> {
  const out = path.join(dir, `v${o.index}-${o.size ?? '320x240'}.mp4`);
  const [w, h] = (o.size ?? '320x240').split('x');
  const first = o.index * o.secs * 30;
  await run('ffmpeg', [
    '-v', 'error', '-y', '-i', source,
    '-filter_complex',
    `[0:v:0]fps=30/1:start_time=0,trim=start_frame=${first}:end_frame=${first + o.secs * 30},setpts=PTS-STARTPTS,scale=${w}:${h},format=yuv420p[v]`,
    '-map', '[v]', '-map_metadata', '-1',
    // B-frames: the parts' composition offsets and edit lists are what the join must carry.
    '-c:v', 'libx264', '-preset', 'ultrafast', '-bf', '2', '-g', '30',
    '-flags', '+global_header', '-movflags', '+faststart', out,
  ]);
  return out;
}

// biome-ignore format: the arguments read as flag-value pairs
async function audioPart(name: string, range?: { from: number; secs: number }): Promise<string> {
  const out = path.join(dir, name);
  const window = range ? ['-ss', String(range.from), '-t', String(range.secs)] : [];
  await run('ffmpeg', [
    '-v', 'error', '-y', ...window, '-i', source, '-map', '0:a:0', '-map', '0:a:1', '-map_metadata', '-1',
    '-c:a', 'aac', '-b:a', '128000', '-ac', '2', '-ar', '48000',
    '-metadata:s:a:0', 'language=eng', '-disposition:a:0', 'default',
    '-metadata:s:a:1', 'language=fra', '-disposition:a:1', '0',
    '-movflags', '+faststart', out,
  ]);
  return out;
}

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mp-join-'));
  source = await makeTracksClip({ width: 320, height: 240, seconds: 6 });
  video = await Promise.all([0, 1, 2].map((index) => videoPart({ index, secs: 2 })));
  audio = await audioPart('audio.m4a');
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Packet {
  pts: number;
  dts: number;
  duration: number;
  flags: string;
  size: string;
  data_hash: string;
  pos: string;
}

/** Every packet of one stream: its timing, flags, size, place and the md5 of its bytes. */
async function probePackets(file: string, stream: string): Promise<Packet[]> {
  // biome-ignore format: the arguments read as flag-value pairs
  const { stdout } = await run('ffprobe', [
    '-v', 'error', '-select_streams', stream, '-show_data_hash', 'md5',
    '-show_entries', 'packet=pts,dts,duration,flags,size,data_hash,pos', '-of', 'json', file,
  ], { maxBuffer: 64 << 20 });
  return (JSON.parse(stdout) as { packets: Packet[] }).packets;
}

/** Each packet as pts, dts, duration, flags, size and md5: what the joins must agree on. */
async function packets(file: string, stream: string): Promise<string[]> {
  return (await probePackets(file, stream)).map((p) =>
    [p.pts, p.dts, p.duration, p.flags, p.size, p.data_hash].join(','),
  );
}

/** ffmpeg's join of the same parts: concat demuxer (packets as they are) + faststart remux. */
async function ffmpegJoin(videoParts: readonly string[], audioFile: string, out: string): Promise<string> {
  const list = path.join(dir, `${path.basename(out)}.txt`);
  await writeFile(list, videoParts.map((f) => `file '${f}'\n`).join(''));
  // biome-ignore format: the arguments read as flag-value pairs
  await run('ffmpeg', [
    '-v', 'error', '-y', '-auto_convert', '0', '-f', 'concat', '-safe', '0', '-i', list, '-i', audioFile,
    '-map', '0:v:0', '-map', '1:a', '-c', 'copy', '-map_metadata', '-1', '-movflags', '+faststart', out,
  ]);
  return out;
}

async function frameHashes(file: string): Promise<string[]> {
  const { stdout } = await run('ffmpeg', ['-v', 'error', '-i', file, '-map', '0:v', '-f', 'framemd5', '-'], {
    maxBuffer: 64 << 20,
  });
  return stdout.split('\n').filter((l) => l && !l.startsWith('#'));
}

test('video parts and a two-track .m4a: the packets of ffmpeg concat + faststart, every track', async () => {
  const joined = path.join(dir, 'joined.mp4');
  const size = await joinMp4s({ sequences: [video, [audio]], output: joined });
  const reference = await ffmpegJoin(video, audio, path.join(dir, 'reference.mp4'));
  const bytes = await readFile(joined);
  assert.equal(size, bytes.length);
  assert.ok(moovBeforeMdat(bytes), 'faststart: moov before mdat');
  for (const stream of ['v:0', 'a:0', 'a:1']) {
    const ours = await packets(joined, stream);
    assert.equal(ours.length, (await packets(reference, stream)).length, `${stream}: packet count`);
    assert.deepEqual(ours, await packets(reference, stream), `${stream}: packets`);
  }
  assert.equal((await packets(joined, 'v:0')).filter((p) => p.includes(',K')).length, 6, 'a key frame per second');
  assert.deepEqual(await frameHashes(joined), await frameHashes(reference));
  const { stdout } = await run('ffprobe', [
    ...['-v', 'error', '-show_entries', 'stream=codec_type:stream_tags=language:stream_disposition=default'],
    ...['-of', 'json', joined],
  ]);
  const streams = (
    JSON.parse(stdout) as { streams: { tags?: { language?: string }; disposition: { default: number } }[] }
  ).streams;
  assert.deepEqual(
    streams.map((s) => [s.tags?.language ?? 'und', s.disposition.default]),
    [
      ['und', 1],
      ['eng', 1],
      ['fra', 0],
    ],
  );
});

test('the media data is interleaved: the audio of the first second lies before the video of the last', async () => {
  const joined = path.join(dir, 'joined-interleaved.mp4');
  await joinMp4s({ sequences: [video, [audio]], output: joined });
  const pos = async (stream: string) => (await probePackets(joined, stream)).map((p) => Number(p.pos));
  const [v, a] = [await pos('v:0'), await pos('a:0')];
  assert.ok(
    (a[0] ?? Infinity) < (v[40] ?? 0),
    `the first audio packet (at ${a[0]}) comes before the second second's video`,
  );
  assert.ok((a.at(-1) ?? 0) > (v[60] ?? Infinity), 'the last audio packet comes after the third second of video');
});

test('audio in pieces: the parts’ packets one after the other, timed from the first part’s priming', async () => {
  const pieces = [await audioPart('a0.m4a', { from: 0, secs: 3 }), await audioPart('a1.m4a', { from: 3, secs: 3 })];
  const joined = path.join(dir, 'joined-pieces.mp4');
  await joinMp4s({ sequences: [video, pieces], output: joined });
  for (const stream of ['a:0', 'a:1']) {
    const ours = await probePackets(joined, stream);
    const parts = [...(await probePackets(pieces[0] ?? '', stream)), ...(await probePackets(pieces[1] ?? '', stream))];
    // The same bytes in the same order; each piece's own priming packet (these pieces are
    // encoded apart) is a packet like any other in the middle of the whole.
    const content = (ps: Packet[]) => ps.map((p) => `${p.size},${p.data_hash},${p.flags.replace('D', '_')}`);
    assert.deepEqual(content(ours), content(parts));
    // The first part's start as it is (its priming, its edit list)...
    assert.deepEqual(
      ours.slice(0, 3).map(timing),
      (await probePackets(pieces[0] ?? '', stream)).slice(0, 3).map(timing),
    );
    // ...and every packet decoded right after the one before.
    for (let k = 1; k < ours.length; k++) {
      const [prev, cur] = [ours[k - 1], ours[k]];
      assert.equal(cur?.dts, (prev?.dts ?? 0) + (prev?.duration ?? 0), `${stream} packet ${k}: dts follows on`);
    }
    // The last part's edit trims its last packet as it did alone, to the movie's 1 ms.
    const lastDuration = (ps: Packet[]) => ps.at(-1)?.duration ?? 0;
    assert.ok(Math.abs(lastDuration(ours) - lastDuration(parts)) < 48, `${stream}: the last packet's duration`);
  }
});

const timing = (p: Packet) => `${p.pts},${p.dts},${p.duration}`;

test('Chromium plays the joined MP4, read by ranges as a web server serves it', async (t) => {
  const player = await startBrowserPlayer();
  if ('skip' in player) return t.skip(player.skip);
  const joined = path.join(dir, 'joined-played.mp4');
  await joinMp4s({ sequences: [video, [audio]], output: joined });
  const web = await startHttp({ '/joined.mp4': serveRanges(joined).route });
  try {
    const r = await player.playFile(web.url('/joined.mp4'));
    assert.equal(r.error, undefined, r.log.join('\n'));
    assert.ok(r.played >= 1, `played to ${r.played} s`);
    assert.equal(r.videoHeight, 240);
    assert.ok(Math.abs(r.duration - 6) < 0.05, `duration ${r.duration}`);
  } finally {
    await web.close();
    await player.close();
  }
});

// biome-ignore format: the arguments read as flag-value pairs
async function hevcPart(crf: number): Promise<string> {
  const out = path.join(dir, `hevc-${crf}.mp4`);
  await run('ffmpeg', [
    '-v', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=30', '-t', '2',
    '-c:v', 'libx265', '-crf', String(crf), '-preset', 'ultrafast', '-g', '30', '-tag:v', 'hvc1',
    '-x265-params', 'log-level=error:scenecut=0:open-gop=0', '-movflags', '+faststart', out,
  ]);
  return out;
}

test('HEVC parts of different CRFs (x265 notes its settings in their hvcC) join as ffmpeg joins them', async () => {
  const parts = [await hevcPart(26), await hevcPart(34)];
  const joined = path.join(dir, 'joined-hevc.mp4');
  await joinMp4s({ sequences: [parts], output: joined });
  const list = path.join(dir, 'hevc.txt');
  await writeFile(list, parts.map((f) => `file '${f}'\n`).join(''));
  const reference = path.join(dir, 'reference-hevc.mp4');
  // biome-ignore format: the arguments read as flag-value pairs
  await run('ffmpeg', [
    '-v', 'error', '-y', '-auto_convert', '0', '-f', 'concat', '-safe', '0', '-i', list,
    '-c', 'copy', '-movflags', '+faststart', reference,
  ]);
  assert.deepEqual(await packets(joined, 'v:0'), await packets(reference, 'v:0'));
  assert.deepEqual(await frameHashes(joined), await frameHashes(reference));
});

test('parts that differ in their codec configuration are refused, not joined', async () => {
  const other = await videoPart({ index: 1, secs: 2, size: '426x240' });
  await assert.rejects(
    joinMp4s({ sequences: [[video[0] ?? '', other]], output: path.join(dir, 'mismatch.mp4') }),
    /mp4 join: .* differs from .* in track 1/,
  );
});
