import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { LiveRendition } from '../../src/live/llhls/index.ts';
import { liveFmp4, PART_US } from './llhls-source.ts';

// The packager fed by ffmpeg writing in real time (-re): a player's loop of blocking reloads,
// each asking for the part after the newest it has seen, gets every part as it is written.

/** The newest part a playlist lists: [msn, part index]. */
function newestPart(text: string): [number, number] {
  const parts = [...text.matchAll(/^#EXT-X-PART:.*URI="(\d+)\.(\d+)\.m4s"/gm)];
  const last = parts.at(-1);
  return [Number(last?.[1]), Number(last?.[2])];
}

test('live ffmpeg: blocking reloads follow every part as it comes; the ended playlist is whole', async () => {
  const rendition = new LiveRendition({
    name: 'live',
    timing: { partTargetSecs: PART_US / 1e6, segmentTargetSecs: 1, windowSecs: 30 },
  });
  const ffmpeg = liveFmp4(4);
  ffmpeg.stdout.on('data', (chunk: Buffer) => rendition.write(chunk));
  const exited = once(ffmpeg, 'exit').then(() => rendition.end());

  const first = await rendition.playlist({});
  assert.equal(first.status, 200);
  let [msn, part] = newestPart(first.status === 200 ? first.body : '');
  const seen: string[] = [`${msn}.${part}`];
  for (;;) {
    // hls.js asks for the next part of the same segment; past the segment's last part the
    // server answers with the next segment's first (RFC 8216bis, 6.2.5.2).
    const answer = await rendition.playlist({ msn, part: part + 1 });
    assert.equal(answer.status, 200, JSON.stringify(answer));
    const text = answer.status === 200 ? answer.body : '';
    if (text.includes('#EXT-X-ENDLIST')) break;
    const [m, p] = newestPart(text);
    assert.ok(m > msn || (m === msn && p > part), `answered with ${m}.${p} for a request past ${msn}.${part}`);
    seen.push(`${m}.${p}`);
    [msn, part] = [m, p];
  }
  await exited;
  const final = await rendition.playlist({});
  const text = final.status === 200 ? final.body : '';
  const listed = [...text.matchAll(/^#EXT-X-PART:.*URI="(\d+\.\d+)\.m4s"/gm)].map((m) => m[1]);
  // Each answer brought exactly the next part: the parts the ended playlist still lists (its
  // last three segments') are the last ones followed, none skipped.
  assert.ok(listed.length >= 8, `${listed.length} parts listed`);
  assert.deepEqual(seen.slice(-listed.length), listed);
  assert.ok(seen.length >= 8, `${seen.length} parts followed`);
  const extinf = [...text.matchAll(/#EXTINF:([\d.]+),/g)].map((m) => Number(m[1]));
  assert.equal(extinf.length, 4);
  for (const secs of extinf) assert.ok(Math.abs(secs - 1) < 0.05, `a segment of ${secs} s`);
  assert.ok(Math.abs(rendition.stats().segmentsSecs - 4) < 0.1);
});
