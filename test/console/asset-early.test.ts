// The console's asset page of an asset still processing that plays already (`playableAt`):
// the player, under "Playable while processing", plays its growing (EVENT) playlist from the
// start, and the page says what is still to come. The asset is put in that state as its
// task's pieces put it (the task running, its playable mark set) with a small EVENT playlist
// where the asset's HLS master lives, so no encode of a long input is needed here; the
// pieces' side is test/assets/playable-early.test.ts.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { buildConsole, consoleIsStale } from '../../scripts/build-console.ts';
import { launchChromium, open, problemsOf, signedIn } from '../helpers/console-page.ts';
import { makeClip } from '../helpers/media.ts';
import { startTestServer, type TestServer, waitFor } from '../helpers/server.ts';

const run = promisify(execFile);

/** The bits of an HTMLVideoElement the test reads (the root tsconfig has no DOM types). */
interface Media {
  currentTime: number;
  muted: boolean;
}

const browser = await launchChromium();
const skip = typeof browser === 'string' ? browser : false;

describe('the console plays an asset that is still processing', { skip }, () => {
  let server: TestServer;
  let key: string;
  let asset: { id: string; playbackId: string };

  /** An EVENT playlist (not ended, as the first pieces leave it) of `clip` in `dir`. */
  async function eventPlaylist(clip: string, dir: string): Promise<void> {
    await mkdir(dir, { recursive: true });
    const playlist = path.join(dir, 'index.m3u8');
    await run('ffmpeg', [
      ...['-v', 'error', '-y', '-i', clip, '-c', 'copy', '-f', 'hls', '-hls_time', '1'],
      ...['-hls_playlist_type', 'event', '-hls_segment_filename', path.join(dir, '%d.ts'), playlist],
    ]);
    const text = await readFile(playlist, 'utf8');
    await writeFile(playlist, text.replace('#EXT-X-ENDLIST\n', ''));
  }

  before(async () => {
    if (consoleIsStale()) await buildConsole();
    const clip = await makeClip({ width: 320, height: 180, seconds: 4 });
    // No worker: the asset stays as the test puts it.
    server = await startTestServer({ roles: { api: true, worker: false } });
    key = await server.key('early');
    const res = await server.call('POST', '/api/asset/request-upload', { key, body: { name: 'a film' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    asset = res.body.asset;
    // What the pieces do: the task runs (the asset follows it to `processing`), the early
    // playlists are written at the asset's HLS master, and the task is marked playable.
    await eventPlaylist(clip, path.join(server.dataDir, 'media', 'asset', asset.playbackId, 'hls'));
    await server.running.core.db.query(`UPDATE tasks SET phase = 'running', playable_at = now() WHERE id = $1`, [
      res.body.task.id,
    ]);
  });
  after(async () => {
    if (typeof browser !== 'string') await browser.close();
    await server?.stop();
  });

  it('shows the player under "Playable while processing", and it plays from the start', async () => {
    if (typeof browser === 'string') throw new Error(browser);
    const wire = (await server.call('GET', `/api/asset/${asset.id}`, { key })).body;
    assert.equal(wire.status.phase, 'processing');
    assert.equal(typeof wire.playableAt, 'number');
    const p = await signedIn(browser, { url: server.url, key });
    const problems = problemsOf(p, [/net::ERR_ABORTED$/]);
    await open(p, `#/assets/${asset.id}`, /a film/);
    await p.getByRole('heading', { name: 'Playable while processing' }).waitFor();
    await p.getByText(/plays from the start while the rest is encoded/).waitFor();
    const video = p.getByLabel('Video player');
    await video.evaluate((v: Media) => {
      v.muted = true;
    });
    await p.getByRole('button', { name: 'Play', exact: true }).click();
    await waitFor(async () => (await video.evaluate((v: Media) => v.currentTime)) > 0.3, 30_000, 'playing');
    const at = await video.evaluate((v: Media) => v.currentTime);
    assert.ok(at < 3, `started near the beginning, not at the playlist's end (${at} s)`);
    await p.close();
    assert.deepEqual(problems, []);
  });
});
