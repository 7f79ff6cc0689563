import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { promisify } from 'node:util';
import { LiveRendition } from '../../src/live/llhls/index.ts';
import { openChromium } from '../helpers/browser.ts';
import { publishTestSource, watchLatency } from '../helpers/live.ts';
import { liveFmp4, PART_US } from './llhls-source.ts';

// The packager alone played by hls.js in low-latency mode: the frame-numbered source (FLV, as
// a publisher sends it) remuxed by ffmpeg into fragmented MP4 (-c copy, as the ladder's source
// rendition), packaged by one LiveRendition behind a bare HTTP server, played in Chromium.
// Measures glass-to-glass latency through the packager without any transcoding.

const dir = await mkdtemp(path.join(tmpdir(), 'llhls-play-'));
after(() => rm(dir, { recursive: true, force: true }));

/** Serves one rendition as `/r/...` with CORS (the player page has another origin); counts blocking reloads. */
async function serveRendition(rendition: LiveRendition) {
  const seen = { blocking: 0, parts: 0, segments: 0, errors: [] as string[] };
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const headers = { 'access-control-allow-origin': '*', 'cache-control': 'no-cache' };
    const name = url.pathname.replace(/^\/r\//, '');
    const abort = new AbortController();
    res.once('close', () => abort.abort());
    if (name === 'index.m3u8') {
      const msn = url.searchParams.get('_HLS_msn');
      const part = url.searchParams.get('_HLS_part');
      if (msn !== null) seen.blocking++;
      const answer = await rendition.playlist({
        ...(msn === null ? {} : { msn: Number(msn) }),
        ...(part === null ? {} : { part: Number(part) }),
        signal: abort.signal,
      });
      // A reload the player dropped when the page closed is no error.
      if (answer.status !== 200 && !abort.signal.aborted)
        seen.errors.push(`${req.url}: ${answer.status} ${answer.reason}`);
      const body = answer.status === 200 ? answer.body : answer.reason;
      return res.writeHead(answer.status, { ...headers, 'content-type': 'application/vnd.apple.mpegurl' }).end(body);
    }
    const file = await rendition.file(name, abort.signal);
    if (/^\d+\.\d+\.m4s$/.test(name)) seen.parts++;
    if (/^\d+\.m4s$/.test(name)) seen.segments++;
    if (file === undefined) {
      seen.errors.push(`${req.url}: 404`);
      return res.writeHead(404, headers).end();
    }
    res.writeHead(200, { ...headers, 'content-type': 'video/mp4' }).end(file);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  after(() => new Promise<void>((r) => server.close(() => r())).then(() => server.closeAllConnections()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/r/index.m3u8`, seen };
}

test('hls.js in low-latency mode plays the packaged parts (blocking reloads, parts, latency); without it, the segments', async (t) => {
  const browser = await openChromium();
  if (typeof browser === 'string') return t.skip(browser);
  after(() => browser.close());
  const fifo = path.join(dir, 'source.flv');
  await promisify(execFile)('mkfifo', [fifo]);
  const rendition = new LiveRendition({
    name: 'source',
    timing: { partTargetSecs: PART_US / 1e6, segmentTargetSecs: 1, windowSecs: 30 },
  });
  const remux = spawn(
    'ffmpeg',
    [
      ...['-hide_banner', '-loglevel', 'error', '-nostdin', '-f', 'flv', '-i', fifo, '-c', 'copy'],
      ...['-f', 'mp4', '-movflags', 'empty_moov+default_base_moof+frag_keyframe'],
      ...['-frag_duration', String(PART_US), 'pipe:1'],
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  after(() => remux.kill('SIGKILL'));
  remux.stdout.on('data', (chunk: Buffer) => rendition.write(chunk));
  remux.once('exit', () => rendition.end());
  const publish = await publishTestSource({ url: fifo, protocol: 'file', seconds: 15 });
  after(() => publish.stop());
  const { url, seen } = await serveRendition(rendition);
  // A player without LL-HLS, beside it, on a server of its own (its requests counted apart).
  const plain = await serveRendition(rendition);

  // One after the other: a page beside another is not painted at its frame rate.
  const report = await watchLatency(browser, { url, lowLatency: true, seconds: 5, source: publish });
  const plainReport = await watchLatency(browser, { url: plain.url, lowLatency: false, seconds: 2, source: publish });
  t.diagnostic(
    `glass-to-glass p50 ${Math.round(report.p50)} ms, p95 ${Math.round(report.p95)} ms; hls.js latency ` +
      `${report.hlsLatency?.toFixed(2)} s (target ${report.hlsTargetLatency?.toFixed(2)} s); ` +
      `${report.samples.length} frames, ${report.stalls.length} stalls; ${seen.blocking} blocking reloads, ${seen.parts} parts`,
  );
  assert.equal(report.error, undefined, report.log.join('\n'));
  assert.ok(report.played, report.log.join('\n'));
  assert.ok(report.samples.length > 90, `${report.samples.length} frames presented`);
  assert.equal(report.unreadable, 0);
  assert.ok(seen.blocking > 5, `${seen.blocking} blocking playlist reloads`);
  assert.ok(seen.parts > 5, `${seen.parts} parts fetched`);
  assert.deepEqual(seen.errors, []);
  t.diagnostic(`without low-latency mode: p50 ${Math.round(plainReport.p50)} ms, ${plain.seen.segments} segments`);
  assert.equal(plainReport.error, undefined, plainReport.log.join('\n'));
  assert.ok(plainReport.samples.length > 45, `${plainReport.samples.length} frames presented`);
  // It may still hold its reloads for the next segment (_HLS_msn alone); parts it leaves.
  assert.equal(plain.seen.parts, 0);
  assert.ok(plain.seen.segments >= 2, `${plain.seen.segments} segments`);
});

test("hls.js plays on across a restart: EXT-X-DISCONTINUITY, the new run's init, frames of both runs", async (t) => {
  const browser = await openChromium();
  if (typeof browser === 'string') return t.skip(browser);
  after(() => browser.close());
  const rendition = new LiveRendition({
    name: 'source',
    timing: { partTargetSecs: PART_US / 1e6, segmentTargetSecs: 1, windowSecs: 30 },
  });
  const feed = (child: ReturnType<typeof liveFmp4>) => {
    child.stdout.on('data', (chunk: Buffer) => rendition.write(chunk));
    return new Promise<void>((r) => child.once('exit', () => r()));
  };
  const FIRST_RUN_FRAMES = 8 * 30;
  const runs = feed(liveFmp4(8, { frameCodeFrom: 0 })).then(() => {
    // The second run numbers its frames on from the first's, so a frame tells its run.
    rendition.restart();
    return feed(liveFmp4(6, { frameCodeFrom: FIRST_RUN_FRAMES })).then(() => rendition.end());
  });
  const { url, seen } = await serveRendition(rendition);
  const report = await watchLatency(browser, { url, lowLatency: true, seconds: 9 });
  await runs;
  const numbers = report.samples.map((s) => s.n);
  t.diagnostic(
    `${report.samples.length} frames (${Math.min(...numbers)}..${Math.max(...numbers)}), stalls: ${JSON.stringify(report.stalls)}`,
  );
  assert.equal(report.error, undefined, report.log.join('\n'));
  assert.equal(report.unreadable, 0);
  assert.ok(numbers.some((n) => n < FIRST_RUN_FRAMES) && numbers.some((n) => n >= FIRST_RUN_FRAMES + 30));
  const final = await rendition.playlist({});
  assert.match(final.status === 200 ? final.body : '', /#EXT-X-DISCONTINUITY\n#EXT-X-MAP:URI="init-\d+.mp4"/);
  assert.deepEqual(seen.errors, []);
});
