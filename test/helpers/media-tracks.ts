import { execFile } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { cachedMedia } from './media-cache.ts';

const run = promisify(execFile);

/** Two cues a second apart: enough for a player to list the track and show a line. */
function subripText(seconds: number): string {
  const at = (s: number): string => `00:00:${String(s).padStart(2, '0')},000`;
  const cues: string[] = [];
  for (let s = 0, n = 1; s + 1 <= seconds; s += 2, n++) cues.push(`${n}\n${at(s)} --> ${at(s + 1)}\nLine ${n}\n`);
  return cues.join('\n');
}

/**
 * A Matroska clip with one H.264 video track, two AAC audio tracks (English, the default,
 * at 440 Hz and French at 660 Hz, so the two are told apart by ear) and an English SRT
 * subtitle track: the input of issue #19's "every audio track and subtitles". Made once per
 * run like media.ts's clips.
 */
export function makeTracksClip(o: { width: number; height: number; seconds: number }): Promise<string> {
  return cachedMedia(`tracks-${o.width}x${o.height}-${o.seconds}s-eng-fra-srt.mkv`, async (tmp) => {
    const srt = `${tmp}.srt`;
    await writeFile(srt, subripText(o.seconds));
    // biome-ignore format: the arguments read as flag-value pairs
    await run('ffmpeg', [
      '-v', 'error', '-y',
      '-f', 'lavfi', '-i', `testsrc2=size=${o.width}x${o.height}:rate=30`,
      '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000',
      '-f', 'lavfi', '-i', 'sine=frequency=660:sample_rate=48000',
      '-i', srt,
      '-map', '0:v', '-map', '1:a', '-map', '2:a', '-map', '3:s',
      '-t', String(o.seconds),
      '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p',
      '-c:a', 'aac', '-b:a', '96k', '-c:s', 'srt',
      '-metadata:s:a:0', 'language=eng', '-metadata:s:a:1', 'language=fra', '-metadata:s:s:0', 'language=eng',
      '-disposition:v:0', 'default', '-disposition:a:0', 'default', '-disposition:a:1', '0',
      '-f', 'matroska', tmp,
    ]);
    await rm(srt, { force: true });
  });
}
