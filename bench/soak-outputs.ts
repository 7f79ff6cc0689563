// The soak's check of what a task left in the bucket (bench/soak.ts): every playlist complete
// and every output decoded whole. A split task's HLS has audio renditions of their own
// (audio-only playlists): those must hold the input's audio, to within a few AAC frames.

import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { TestS3 } from '../test/helpers/s3.ts';

const run = promisify(execFile);

/** What the input holds: its video frames and its audio length in AAC frames of 1024 samples at 48 kHz. */
export interface Expected {
  frames: number;
  aacFrames: number;
}

export interface OutputCheck {
  objects: number;
  playlists: number;
  segments: number;
  mp4s: number;
  problems: string[];
}

export const noOutputs = (): OutputCheck => ({ objects: 0, playlists: 0, segments: 0, mp4s: 0, problems: [] });

/** Adds `one`'s counts and problems to `into`. */
export function addOutputs(into: OutputCheck, one: OutputCheck): void {
  into.objects += one.objects;
  into.playlists += one.playlists;
  into.segments += one.segments;
  into.mp4s += one.mp4s;
  into.problems.push(...one.problems);
}

/** What an input holds, probed once: its frames and its audio in AAC frames at 48 kHz. */
export async function expectedOf(file: string): Promise<Expected> {
  const video = await counted(file, 'v');
  const { stdout } = await run('ffprobe', [
    ...['-v', 'error', '-select_streams', 'a:0', '-show_entries', 'stream=duration', '-of', 'csv=p=0', file],
  ]);
  return { frames: video.frames, aacFrames: Math.round((Number(stdout.trim()) * 48000) / 1024) };
}

/** Downloads every object under `prefix` and checks that each playlist is complete and every output decodes whole. */
export async function checkOutputs(o: {
  s3: TestS3;
  bucket: string;
  prefix: string;
  expected: Expected;
  into: string;
}): Promise<OutputCheck> {
  const { prefix } = o;
  const keys = (await o.s3.keys(o.bucket)).filter((k) => k.startsWith(`${prefix}/`));
  const c: OutputCheck = { ...noOutputs(), objects: keys.length };
  const have = new Set(keys);
  for (const k of keys) {
    const file = path.join(o.into, k);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, (await o.s3.get(o.bucket, k)).body);
  }
  const master = `${prefix}/hls/index.m3u8`;
  if (!have.has(master)) c.problems.push(`${prefix}: no master playlist`);
  for (const k of keys.filter((x) => x.endsWith('.m3u8') && x !== master)) {
    c.playlists++;
    const text = readFileSync(path.join(o.into, k), 'utf8');
    if (!text.includes('#EXT-X-ENDLIST')) c.problems.push(`${k}: no #EXT-X-ENDLIST`);
    for (const uri of text.split('\n').filter((l) => l && !l.startsWith('#'))) {
      c.segments++;
      if (!have.has(path.posix.join(path.posix.dirname(k), uri))) c.problems.push(`${k}: segment ${uri} missing`);
    }
    await decodesWhole(path.join(o.into, k), o.expected, c);
  }
  for (const k of keys.filter((x) => x.endsWith('.mp4'))) {
    c.mp4s++;
    await decodesWhole(path.join(o.into, k), o.expected, c);
  }
  if (c.mp4s === 0) c.problems.push(`${prefix}: no MP4`);
  return c;
}

/** Frames of the first video (`v`) or audio (`a`) stream, decoded and counted by ffprobe; its error output beside. */
async function counted(file: string, kind: 'v' | 'a'): Promise<{ frames: number; errors: string }> {
  const { stdout, stderr } = await run('ffprobe', [
    ...['-v', 'error', '-count_frames', '-select_streams', `${kind}:0`],
    ...['-show_entries', 'stream=nb_read_frames', '-of', 'json', file],
  ]);
  const probed = JSON.parse(stdout) as { streams?: { nb_read_frames?: string }[] };
  return { frames: Number(probed.streams?.[0]?.nb_read_frames ?? Number.NaN), errors: stderr.trim() };
}

/** An output with video holds every input frame; an audio-only one the input's audio within 3 AAC frames. */
async function decodesWhole(file: string, expected: Expected, c: OutputCheck): Promise<void> {
  try {
    const video = await counted(file, 'v');
    if (video.errors) c.problems.push(`${file}: ffprobe: ${video.errors.slice(0, 200)}`);
    if (!Number.isNaN(video.frames)) {
      if (video.frames !== expected.frames)
        c.problems.push(`${file}: ${video.frames} frames, the input has ${expected.frames}`);
      return;
    }
    const audio = await counted(file, 'a');
    if (Number.isNaN(audio.frames)) c.problems.push(`${file}: neither video nor audio`);
    else if (Math.abs(audio.frames - expected.aacFrames) > 3)
      c.problems.push(`${file}: ${audio.frames} AAC frames, the input's audio makes ${expected.aacFrames}`);
  } catch (err) {
    c.problems.push(`${file}: ffprobe failed: ${(err as Error).message.slice(0, 200)}`);
  }
}
