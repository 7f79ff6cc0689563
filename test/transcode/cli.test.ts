import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, it } from 'node:test';
import { runTranscodeCommand } from '../../src/cli/transcode.ts';
import { sample } from '../helpers/media.ts';

const dirs: string[] = [];
after(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

it('mediaplane transcode writes HLS and fMP4 to a local folder, and refuses bad usage with 2', async () => {
  const out = await mkdtemp(path.join(os.tmpdir(), 'mp-cli-'));
  dirs.push(out);
  const code = await runTranscodeCommand([
    sample('08_bear_vp9_odd_resolution_161x121_no_audio.webm'),
    '--out',
    out,
    '--hls',
    '--fmp4',
    '--segment',
    '2',
  ]);
  assert.equal(code, 0);
  for (const f of [
    'hls/index.m3u8',
    'hls/120p0/index.m3u8',
    'hls/120p0/0.ts',
    'fmp4/index.m3u8',
    'fmp4/120p0/init.mp4',
  ]) {
    assert.ok(existsSync(path.join(out, f)), f);
  }
  assert.ok(!existsSync(path.join(out, 'mp4')), 'no MP4 unless asked');
  assert.equal(await runTranscodeCommand(['--out', out]), 2);
  assert.equal(await runTranscodeCommand([sample('12_BROKEN_vp9_invalid_bitstream.webm'), '--out', out]), 1);
});
