// The RTMP ingest server with real ffmpeg publishers: what an accepted publish writes is an FLV
// file ffprobe reads (H.264 + AAC, the right duration), a refused key gets ffmpeg's error and
// no media, disconnect() cuts ffmpeg off, and two publishers run side by side on one server.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { IngestListener } from '../../src/live/ingest-types.ts';
import { startRtmpServer } from '../../src/live/rtmp/index.ts';
import { ffprobe } from '../helpers/media.ts';
import { captureLog, type FfmpegRun, ffmpegPublish, killAll, recordingGate } from '../helpers/rtmp.ts';

const KEY_A = 'key-a-5f1c9e0d8b7a';
const KEY_B = 'key-b-0e9d8c7b6a5f';
const REFUSED_KEY = 'refused-k3y-9a8b7c6d';
const dir = mkdtempSync(path.join(tmpdir(), 'rtmp-server-'));
const runs: FfmpegRun[] = [];
const { log, lines } = captureLog();
const recorder = recordingGate((key) =>
  key === REFUSED_KEY ? { accepted: false, code: 'BadName', description: 'No stream has this key' } : true,
);
let server: IngestListener;

const url = (key: string): string => `rtmp://127.0.0.1:${server.port}/live/${key}`;

/** The FLV of a publish written to a file and probed. */
async function probeFlv(flv: Buffer, name: string) {
  const file = path.join(dir, name);
  writeFileSync(file, flv);
  return ffprobe(file);
}

describe('RTMP server with ffmpeg publishers', () => {
  before(async () => {
    server = await startRtmpServer({ host: '127.0.0.1', port: 0, log, gate: recorder.gate, idleTimeoutMs: 5000 });
  });
  after(async () => {
    killAll(runs);
    await server.close();
    rmSync(dir, { recursive: true, force: true });
    assert.ok(
      !lines.text.includes(KEY_A) && !lines.text.includes(KEY_B) && !lines.text.includes(REFUSED_KEY),
      'a key in the logs',
    );
  });

  it('writes two publishers at once as FLV that ffprobe reads: H.264 + AAC of the right duration', async () => {
    const a = ffmpegPublish(url(KEY_A), 4);
    const b = ffmpegPublish(`${url(KEY_B)}?token=x`, 3);
    runs.push(a, b);
    assert.equal(await a.exited, 0, a.stderr());
    assert.equal(await b.exited, 0, b.stderr());
    for (const [key, seconds] of [
      [KEY_A, 4],
      [KEY_B, 3],
    ] as const) {
      const rec = recorder.publishes.find((p) => p.attempt.streamKey === key);
      assert.ok(rec?.accepted, `a publish with key ${key === KEY_A ? 'A' : 'B'}`);
      await rec.done;
      assert.equal(rec.ended?.kind, 'left');
      assert.equal(rec.attempt.protocol, 'rtmp');
      assert.match(rec.attempt.remote, /^127\.0\.0\.1:\d+$/);
      const flv = rec.flv();
      assert.deepEqual([...flv.subarray(0, 13)], [0x46, 0x4c, 0x56, 1, 5, 0, 0, 0, 9, 0, 0, 0, 0]);
      // The first tag is onMetaData as FLV files have it (no @setDataFrame).
      assert.equal(flv[13], 18);
      assert.equal(flv.toString('latin1', 24, 37), '\x02\x00\x0aonMetaData');
      const probed = await probeFlv(flv, `${seconds}.flv`);
      const codecs = probed.streams.map((s) => s.codec_name).sort();
      assert.deepEqual(codecs, ['aac', 'h264']);
      const duration = Number(probed.format.duration);
      assert.ok(Math.abs(duration - seconds) < 0.3, `duration ${duration} s, expected ${seconds} s`);
    }
  });

  it('refuses a key the gate refuses: ffmpeg exits with the description, and no media was taken', async () => {
    const before = recorder.publishes.length;
    const run = ffmpegPublish(url(REFUSED_KEY), 3);
    runs.push(run);
    const code = await run.exited;
    assert.notEqual(code, 0);
    assert.match(run.stderr(), /No stream has this key/);
    const rec = recorder.publishes[before];
    assert.equal(rec?.accepted, false);
    assert.equal(rec?.chunks.length, 0);
    assert.match(lines.text, /publish refused/);
  });

  it('cuts ffmpeg off on disconnect()', async () => {
    const before = recorder.publishes.length;
    const run = ffmpegPublish(url(KEY_A), 10);
    runs.push(run);
    const rec = await recorder.nth(before);
    while (rec.flv().length < 20_000) await new Promise((r) => setTimeout(r, 50));
    rec.attempt.disconnect('the stream was terminated');
    await rec.done;
    assert.deepEqual(rec.ended, { kind: 'cut', reason: 'the stream was terminated' });
    const code = await run.exited;
    assert.notEqual(code, 0, 'ffmpeg should fail when cut off');
    assert.match(lines.text, /connection cut off/);
  });
});
