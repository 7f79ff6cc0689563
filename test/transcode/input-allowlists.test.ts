// ffprobe and ffmpeg open a user's file only as a media container (src/transcode/media-input.ts):
// a file that is really an HLS playlist, a DASH manifest, a concat list or an image is refused
// with words a user understands, and nothing it names is opened: no file of the disk (a FIFO
// that would block an open for ever), no URL (a listener on loopback that counts requests).
// The corpus is generated (fast-check, FUZZ_SEED to replay, FUZZ_RUNS for more); every real
// sample still probes as before.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { isMediaplaneError } from '../../src/lib/errors.ts';
import { checkDecodes, measureDuration } from '../../src/transcode/decode-check.ts';
import { assertGuardedInputs, inputArgs } from '../../src/transcode/media-input.ts';
import { probe } from '../../src/transcode/probe.ts';
import { runProcess } from '../../src/transcode/run.ts';
import { SAMPLES } from '../helpers/media.ts';

const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const RUNS = Number(process.env.FUZZ_RUNS ?? 24);

/** A loopback listener that counts every request made of it (ffmpeg's own HTTP client included). */
async function startListener(): Promise<{ server: Server; port: number; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url} ${req.headers['user-agent'] ?? ''}`);
    res.writeHead(200, { 'content-type': 'video/mp2t' }).end(Buffer.alloc(188 * 10));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, hits };
}

/** What a hostile file may name: a FIFO (an open would block), a real file by several spellings, a URL. */
interface Targets {
  fifo: string;
  file: string;
  url: string;
}

const pick = <T>(xs: readonly T[]) => fc.constantFrom(...xs);

/** One way to name a target in a list: absolute, `file:`, relative at some depth, or the URL. */
function named(t: Targets): fc.Arbitrary<string> {
  return fc.oneof(
    pick([t.fifo, `file:${t.fifo}`, t.file, `file:${t.file}`, t.url, `${t.url}?x=1`]),
    fc.integer({ min: 1, max: 8 }).map((d) => `${'../'.repeat(d)}${t.fifo.slice(1)}`),
  );
}

/** A text that ffmpeg would take for a playlist, a manifest or a list naming `t`. */
function hostileText(t: Targets): fc.Arbitrary<{ kind: string; text: string }> {
  const lead = pick(['', '\uFEFF', ' \n', '\r\n']);
  const eol = pick(['\n', '\r\n']);
  const hlsMedia = fc.tuple(lead, eol, fc.array(named(t), { minLength: 1, maxLength: 4 })).map(([l, e, names]) => ({
    kind: 'hls',
    text: `${l}#EXTM3U${e}#EXT-X-TARGETDURATION:2${e}${names.map((n) => `#EXTINF:2.0,${e}${n}${e}`).join('')}#EXT-X-ENDLIST${e}`,
  }));
  const hlsMaster = fc.tuple(lead, eol, named(t)).map(([l, e, n]) => ({
    kind: 'hls',
    text: `${l}#EXTM3U${e}#EXT-X-STREAM-INF:BANDWIDTH=800000${e}${n}${e}`,
  }));
  const dash = fc.tuple(pick(['', '<?xml version="1.0"?>\n']), named(t)).map(([x, n]) => ({
    kind: 'dash',
    text: `${x}<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="static" mediaPresentationDuration="PT2S" minBufferTime="PT1S"><Period><AdaptationSet mimeType="video/mp2t"><Representation id="1" bandwidth="1000"><BaseURL>${n}</BaseURL></Representation></AdaptationSet></Period></MPD>\n`,
  }));
  const concat = fc.tuple(eol, fc.array(named(t), { minLength: 1, maxLength: 3 })).map(([e, names]) => ({
    kind: 'concat',
    text: `ffconcat version 1.0${e}${names.map((n) => `file '${n}'${e}`).join('')}`,
  }));
  return fc.oneof(hlsMedia, hlsMaster, dash, concat);
}

const STILL_IMAGES = ['png', 'mjpeg', 'bmp'] as const;

describe('inputs opened through the allowlists', () => {
  let dir: string;
  let listener: Awaited<ReturnType<typeof startListener>>;
  let targets: Targets;
  const signal = new AbortController().signal;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mp-allowlists-'));
    listener = await startListener();
    const fifo = path.join(dir, 'nobody-writes-this.ts');
    execFileSync('mkfifo', [fifo]);
    // Another owner's segment, as a real file.
    const file = path.join(dir, 'private.ts');
    execFileSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc2=d=1:s=64x48', '-f', 'mpegts', file]);
    targets = { fifo, file, url: `http://127.0.0.1:${listener.port}/segment.ts` };
  });

  after(async () => {
    await new Promise((r) => listener.server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('every real-world sample is read as before', async () => {
    const names = readdirSync(SAMPLES).filter((n) => /\.(mp4|mkv|webm|m4a)$/.test(n));
    assert.ok(names.length >= 10, `samples in ${SAMPLES}`);
    for (const name of names) {
      const media = await probe(path.join(SAMPLES, name), { ffprobePath: 'ffprobe', signal });
      assert.ok(media.video || media.audioTracks.length > 0, name);
    }
  });

  it(`a generated playlist, manifest or concat list is refused, naming what it is, and opens nothing (seed ${SEED})`, async () => {
    const cases = fc.sample(hostileText(targets), { seed: SEED, numRuns: RUNS });
    for (const [i, c] of cases.entries()) {
      // Named like a video: ffmpeg goes by the content.
      const file = path.join(dir, `upload-${i}.mp4`);
      writeFileSync(file, c.text);
      const err = await probe(file, { ffprobePath: 'ffprobe', signal, timeoutMs: 20_000 }).then(
        () => assert.fail(`probed: ${JSON.stringify(c)}`),
        (e: unknown) => e,
      );
      assert.ok(isMediaplaneError(err) && err.code === 'unsupported_media', `${String(err)} for ${JSON.stringify(c)}`);
      assert.match(err.message, /playlists and lists of other files are not accepted/, JSON.stringify(c));
      // ffmpeg's own reads (the decode check, the duration pass) open nothing either.
      await checkDecodes(file, { ffmpegPath: 'ffmpeg', signal, video: true }).catch(() => undefined);
      await measureDuration(file, { ffmpegPath: 'ffmpeg', signal, video: true });
    }
    assert.deepEqual(listener.hits, [], 'ffmpeg fetched what a list named');
  });

  it('a still image or an image sequence is refused as one', async () => {
    for (const codec of STILL_IMAGES) {
      const file = path.join(dir, `picture-${codec}.mp4`);
      execFileSync('ffmpeg', [
        ...['-v', 'error', '-f', 'lavfi', '-i', 'testsrc2=s=64x48', '-frames:v', '1'],
        ...['-c:v', codec, '-pix_fmt', codec === 'mjpeg' ? 'yuvj420p' : 'rgb24', '-f', 'image2', file],
      ]);
      await assert.rejects(probe(file, { ffprobePath: 'ffprobe', signal }), /still image or an image sequence/, codec);
    }
  });

  it('a command line with an input opened without both allowlists does not start', async () => {
    const fifoArgs = inputArgs(targets.fifo);
    assert.throws(() => assertGuardedInputs(['-i', targets.file, '-f', 'null', '-']), /without its allowlists/);
    assert.throws(
      () => assertGuardedInputs([...fifoArgs, '-protocol_whitelist', 'file', '-i', targets.file]),
      /without its allowlists/,
    );
    assert.throws(() => assertGuardedInputs(['-version']), /no -i input/);
    await assert.rejects(
      runProcess('ffprobe', [targets.file], { signal, timeoutMs: 10_000 }),
      /without its allowlists|no -i input/,
    );
    assert.doesNotThrow(() => assertGuardedInputs([...inputArgs(targets.file), ...inputArgs(targets.url)]));
  });

  it('our own concat lists are read, and may name only our own formats', async () => {
    const list = path.join(dir, 'parts.ffconcat');
    writeFileSync(list, `ffconcat version 1.0\nfile '${targets.file}'\n`);
    const ok = await runProcess('ffmpeg', ['-v', 'error', ...inputArgs(list, 'our-concat'), '-f', 'null', '-'], {
      signal,
      timeoutMs: 30_000,
    });
    assert.equal(ok.code, 0, ok.stderrTail);
    // A list naming a list (or anything else than what we write) is refused inside it.
    const inner = path.join(dir, 'inner.m3u8');
    writeFileSync(inner, `#EXTM3U\n#EXTINF:1.0,\n${targets.url}\n#EXT-X-ENDLIST\n`);
    writeFileSync(list, `ffconcat version 1.0\nfile '${inner}'\n`);
    const refused = await runProcess('ffmpeg', ['-v', 'error', ...inputArgs(list, 'our-concat'), '-f', 'null', '-'], {
      signal,
      timeoutMs: 30_000,
    });
    assert.notEqual(refused.code, 0);
    assert.deepEqual(listener.hits, []);
  });
});
