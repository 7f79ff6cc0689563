import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { inputArgs } from '../../src/transcode/media-input.ts';
import { runProcess, setVodNiceness } from '../../src/transcode/run.ts';
import { makeClip } from '../helpers/media.ts';

// Beside live ingest, VOD's ffmpeg and ffprobe run niced (main.ts sets it), so a live ladder
// keeps real time on a shared node.

/** The pids of the running processes whose command line holds `marker`. */
function pidsWith(marker: string): number[] {
  return readdirSync('/proc').flatMap((name) => {
    if (!/^\d+$/.test(name)) return [];
    try {
      return readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(marker) ? [Number(name)] : [];
    } catch {
      return [];
    }
  });
}

test('ffmpeg started by runProcess runs at the VOD niceness once set, and at the normal one otherwise', async () => {
  after(() => setVodNiceness(0));
  const clip = await makeClip({ width: 160, height: 120, seconds: 3, audio: false });
  const niceness = async (marker: string): Promise<number | undefined> => {
    // -re: the encode lasts the clip's 3 s, long enough to look at it.
    const args = [...['-v', 'error', '-re'], ...inputArgs(clip), '-metadata', `comment=${marker}`, '-f', 'null', '-'];
    const ran = runProcess('ffmpeg', args, { signal: new AbortController().signal, timeoutMs: 60_000 });
    let seen: number | undefined;
    for (let i = 0; i < 100 && seen === undefined; i++) {
      const [pid] = pidsWith(marker);
      if (pid !== undefined) seen = getPriority(pid);
      else await sleep(50);
    }
    await ran;
    return seen;
  };
  setVodNiceness(10);
  assert.equal(await niceness(`vod-nice-${process.pid}`), 10);
  setVodNiceness(0);
  assert.equal(await niceness(`vod-normal-${process.pid}`), getPriority());
});
