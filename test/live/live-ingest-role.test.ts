import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { COMPILE_CACHE_ENV } from '../helpers/compile-cache.ts';
import { seedEmbeddedDb } from '../helpers/embedded-template.ts';
import { freePort, freeUdpPort } from '../helpers/ports.ts';

// `mediaplane ingest`: the API with the RTMP and SRT listeners, for ingest nodes; its banner
// says where publishers connect, and a graceful stop closes the listeners.

const BIN = fileURLToPath(new URL('../../bin/mediaplane.js', import.meta.url));

test('mediaplane ingest listens for RTMP and SRT and says where in its banner', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mediaplane-ingest-'));
  after(() => rmSync(dataDir, { recursive: true, force: true }));
  await seedEmbeddedDb(dataDir);
  const [rtmpPort, srtPort] = [await freePort(), await freeUdpPort()];
  const child = spawn(process.execPath, [BIN, 'ingest'], {
    env: {
      ...process.env,
      ...COMPILE_CACHE_ENV,
      MEDIAPLANE_DATA_DIR: dataDir,
      MEDIAPLANE_PORT: '0',
      MEDIAPLANE_LOG_FORMAT: 'pretty',
      MEDIAPLANE_RTMP_PORT: String(rtmpPort),
      MEDIAPLANE_SRT_PORT: String(srtPort),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  after(() => child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  for (let i = 0; i < 2400 && !/^ {2}SRT /m.test(out) && child.exitCode === null; i++) await sleep(50);
  assert.match(out, /is running: API, live ingest/);
  assert.match(out, new RegExp(`^ {2}RTMP +rtmp://127\\.0\\.0\\.1:${rtmpPort}/live/STREAM_KEY$`, 'm'));
  assert.match(out, new RegExp(`^ {2}SRT +srt://127\\.0\\.0\\.1:${srtPort}\\?streamid=STREAM_KEY$`, 'm'));
  assert.doesNotMatch(out, /worker started/);
  child.kill('SIGTERM');
  // A stop that hangs fails here with what the service said, not at the runner's timeout.
  const stopped = await Promise.race([exited, sleep(60_000).then(() => 'still running' as const)]);
  assert.equal(stopped, 0, `after SIGTERM: ${stopped}\n${out.slice(-4000)}`);
});
