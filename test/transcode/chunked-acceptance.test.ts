import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/index.ts';
import { pdeathsigWorks } from '../../src/lib/tied-process.ts';
import { FileInput, LocalDirStore } from '../../src/storage/index.ts';
import { runPipeline } from '../../src/transcode/index.ts';
import { type BrowserPlayer, type PlayResult, startBrowserPlayer } from '../helpers/browser.ts';
import { startHttp, type TestHttp } from '../helpers/http-input.ts';
import { decodeErrors, moovBeforeMdat } from '../helpers/media.ts';
import { testPostgres } from '../helpers/postgres.ts';
import { spawnWorkerChild } from '../helpers/worker-process.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';
import {
  downloadBucket,
  makeLongClip,
  packetGaps,
  packetSpan,
  packetTimes,
  readMpd,
  segmentProblems,
  segmentSpans,
  serveRanges,
  timelineProblems,
  vmafWindow,
} from '../helpers/seams.ts';
import { databaseFor, startTestServer, type TestServer, waitFor } from '../helpers/server.ts';
import { childrenOf } from '../tasks/procfs.ts';

// Issue #30 acceptance: a generated 3-minute 540p input with audio, longer than the chunking
// threshold (default 120 s), split into chunks (default 30 s: 6 or more) that two worker
// processes on PostgreSQL encode; one worker is SIGKILLed in the middle of a chunk and a third
// takes its place. Then, from the objects in the bucket: HLS (TS and fMP4), DASH and MP4 whose
// segments are within the target, whose timestamps run on across every seam (video within one
// frame, audio within one AAC frame), that decode without an error and play in Chromium across
// a seam (hls.js, shaka-player), whose audio ends within one frame of the video; only the
// killed chunk ran twice; the chunked MP4's VMAF within 0.5 of a single-worker encode's.

const skip = !(await testPostgres())
  ? 'no PostgreSQL server available (apt-get install postgresql)'
  : !pdeathsigWorks() && 'setpriv --pdeathsig is not available';

// CHUNKED_ACCEPTANCE_SECONDS (a multiple of 36) shortens the input for a quick look while
// developing; the acceptance is the 180 s default, with the default threshold and chunk length.
const SECONDS = Number(process.env.CHUNKED_ACCEPTANCE_SECONDS ?? 180);
const CHUNK_SECS = SECONDS / 6;
const THRESHOLD_SECS = SECONDS >= 180 ? 120 : SECONDS / 2;
const FPS = 30;
const FRAME = 1 / FPS;
const AAC_FRAME = 1024 / 48000;
const SEGMENT_SECS = 6;
// Long enough that a loaded host (the suite's, or other work beside it) starves no heartbeat:
// a worker stops a run when heartbeats failed for lease - heartbeat ms, and with 1.5 s leases
// a chunk was stopped (lease-expiring) and ran again three times on a host at load 20. The
// kill costs one lease of waiting.
const LEASE_MS = 6000;
const HEARTBEAT_MS = 500;
// The same x264 settings on every worker (chunks must join without a seam); ultrafast keeps
// the suite's 2-core host busy for about a minute of encoding.
const PRESET = 'ultrafast';
const PROFILES = [
  { name: '540p0', width: 960, height: 540, bitrate: 1_500_000 },
  { name: '270p0', width: 480, height: 270, bitrate: 400_000 },
];
const OUTPUTS = { hls: { path: '/hls' }, fmp4: { path: '/fmp4' }, mp4: { path: '/mp4' } };

interface PieceItem {
  label: string;
  phase: string;
  progress: number;
  runs: number;
  worker?: string;
}
interface Pieces {
  total: number;
  completed: number;
  running: number;
  failed: number;
  items: PieceItem[];
}

/** The chunk's range from its label, "video 60.0-90.0 s (chunk 3 of 7)": [60, 90]. */
function rangeOf(label: string): [number, number] | undefined {
  const m = /(\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?)\s*s/.exec(label);
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}
const isChunk = (p: PieceItem): boolean => /chunk/i.test(p.label);
const ranWith = (p: PieceItem, pid: number | undefined): boolean =>
  pid !== undefined && new RegExp(`\\b${pid}\\b`).test(p.worker ?? '');
/** Sends `sig` to `pid`, which may have exited since it was listed. */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {}
}

describe('a 3-minute 540p input chunked over two worker processes on PostgreSQL (issue #30)', { skip }, () => {
  let work: string;
  let clip: string;
  let server: TestServer;
  let s3: TestS3;
  let web: TestHttp;
  let dataDir: string;
  let out: string;
  let taskId: string;
  let key: string;
  let bucket: string;
  let source: ReturnType<typeof serveRanges>;
  let task: { output: Record<string, unknown>; pieces?: Pieces; status: { phase: string } };
  /** The pieces view the moment the worker was killed, and the chunk it was encoding. */
  let atKill: { pieces: Pieces; chunk: PieceItem; pid: number } | undefined;
  const children: ChildProcess[] = [];
  /** Each step's seconds, printed at the end: where a slow run spent its time. */
  const timings: Record<string, number> = {};

  function spawnWorker(): Promise<ChildProcess> {
    return spawnWorkerChild(
      {
        WORKER_HANDLER: 'transcode',
        DATABASE_URL: server.databaseUrl ?? '',
        // One data folder for every worker: the built-in store (<dataDir>/media) holds the
        // chunks' MP4 pieces for the stitch, as one bucket would for workers on many machines.
        MEDIAPLANE_DATA_DIR: dataDir,
        MEDIAPLANE_ALLOW_PRIVATE_URLS: 'true',
        MEDIAPLANE_LEASE_MS: String(LEASE_MS),
        MEDIAPLANE_HEARTBEAT_MS: String(HEARTBEAT_MS),
        MEDIAPLANE_POLL_MS: '100',
        MEDIAPLANE_RETRY_BACKOFF_MS: '50',
        MEDIAPLANE_X264_PRESET: PRESET,
        // The product's default, as the single-worker encode the VMAF is compared with has it.
        MEDIAPLANE_PER_TITLE: 'true',
        // The defaults, said out loud: 120 s threshold, 30 s chunks.
        MEDIAPLANE_CHUNK_THRESHOLD_SECS: String(THRESHOLD_SECS),
        MEDIAPLANE_CHUNK_SECS: String(CHUNK_SECS),
      },
      children,
    );
  }
  const getTask = async () => (await server.call('GET', `/api/task/${taskId}`, { key })).body;

  /** A chunk running on one of `workers` with its ffmpeg alive, that ffmpeg stopped, or none. */
  async function freezeAChunk(
    pieces: Pieces | undefined,
    workers: ChildProcess[],
  ): Promise<{ pieces: Pieces; chunk: PieceItem; pid: number } | undefined> {
    for (const { pid } of workers) {
      const running = pieces?.items.find((p) => isChunk(p) && p.phase === 'running' && ranWith(p, pid));
      const encoders = pid === undefined ? [] : childrenOf(pid, 'ffmpeg');
      if (!running || pid === undefined || encoders.length === 0) continue;
      for (const e of encoders) signal(e, 'SIGSTOP');
      // Still running after the stop: the stopped ffmpeg is that chunk's encode, not yet done.
      const now: Pieces | undefined = (await getTask()).pieces;
      const chunk = now?.items.find((p) => p.label === running.label && p.phase === 'running' && ranWith(p, pid));
      if (now && chunk) return { pieces: now, chunk, pid };
      for (const e of encoders) signal(e, 'SIGCONT');
    }
    return undefined;
  }

  before(async () => {
    let t = Date.now();
    work = mkdtempSync(path.join(tmpdir(), 'mp-chunked-acc-'));
    dataDir = path.join(work, 'data');
    out = path.join(work, 'bucket');
    clip = await makeLongClip({ width: 960, height: 540, seconds: SECONDS, fps: FPS });
    timings.input = (Date.now() - t) / 1000;
    // A source that answers Range requests, as a CDN does: each chunk reads only its range.
    source = serveRanges(clip);
    [s3, web] = await Promise.all([startS3(), startHttp({ '/long.mp4': source.route })]);
    server = await startTestServer({
      databaseUrl: await databaseFor('postgres'),
      roles: { api: true, worker: false },
      settings: { leaseMs: LEASE_MS },
    });
    key = await server.key('alice');
    const first = await Promise.all([spawnWorker(), spawnWorker()]);
    bucket = await s3.createBucket();
    t = Date.now();
    const res = await server.call('POST', '/api/transcode', {
      key,
      body: {
        input: { url: web.url('/long.mp4') },
        storage: {
          type: 's3',
          endpoint: s3.endpoint,
          bucket,
          credentials: { accessKeyId: s3.credentials.accessKeyId, secretAccessKey: s3.credentials.secretAccessKey },
        },
        outputs: OUTPUTS,
        profiles: PROFILES,
        targetSegmentSizeSecs: SEGMENT_SECS,
      },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    taskId = res.body.id;

    // The kill: a chunk running on either worker, in the middle of its encode. A chunk lasts
    // a second or less on a fast host, so the encode is frozen (SIGSTOP) the moment it is seen:
    // a stopped ffmpeg makes no progress while its worker keeps the lease, and the kill lands
    // mid-chunk however fast the host is. The worker's death takes the stopped ffmpeg with it
    // (its parent-death signal is SIGKILL, which a stopped process receives).
    atKill = await waitFor(
      async () => {
        const got = await getTask();
        if (['failed', 'cancelled', 'completed'].includes(got.status?.phase))
          throw new Error(`the task ${got.status.phase} before a chunk ran: ${got.status.errorMessage ?? ''}`);
        return freezeAChunk(got.pieces, first);
      },
      300_000,
      'a chunk in the middle of its encode',
    );
    const victim = first.find((c) => c.pid === atKill?.pid);
    victim?.kill('SIGKILL');
    if (victim) await new Promise((r) => victim.once('exit', r));
    await spawnWorker();
    task = await waitFor(
      async () => {
        const got = await getTask();
        if (got.status?.phase === 'failed' || got.status?.phase === 'cancelled')
          throw new Error(`the chunked task ${got.status.phase}: ${got.status.errorMessage ?? ''}`);
        return got.status?.phase === 'completed' ? got : undefined;
      },
      900_000,
      'the chunked task to complete',
    );
    timings.chunked = (Date.now() - t) / 1000;
    timings.sourceReadTimes = Number((source.served.bytes / statSync(clip).size).toFixed(2));
    timings.sourceRequests = source.served.requests;
    t = Date.now();
    await mkdir(out, { recursive: true });
    await downloadBucket(s3, bucket, out);
    timings.download = (Date.now() - t) / 1000;
  });

  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    await server?.stop();
    await Promise.all([s3?.close(), web?.close()]);
    if (work) rmSync(work, { recursive: true, force: true });
    console.log(`chunked acceptance timings (s): ${JSON.stringify(timings)}`);
  });

  it('split into 6 or more chunks plus the audio and the stitch, run over both workers; only the killed chunk ran twice', () => {
    const pieces = task.pieces;
    assert.ok(pieces, `GET /api/task/{id} shows the pieces: ${JSON.stringify(task).slice(0, 500)}`);
    const chunks = pieces.items.filter(isChunk);
    assert.ok(chunks.length >= 6, `${chunks.length} chunks: ${pieces.items.map((p) => p.label).join('; ')}`);
    assert.ok(
      pieces.items.some((p) => /audio/i.test(p.label)) && pieces.items.some((p) => /stitch/i.test(p.label)),
      'an audio piece and a stitch piece',
    );
    assert.equal(pieces.completed, pieces.total, JSON.stringify(pieces));
    assert.ok(atKill);
    const killed = atKill.chunk.label;
    const runs = Object.fromEntries(pieces.items.map((p) => [p.label, p.runs]));
    assert.deepEqual(
      runs,
      Object.fromEntries(pieces.items.map((p) => [p.label, p.label === killed ? 2 : 1])),
      `only ${killed} ran again`,
    );
    const killedNow = pieces.items.find((p) => p.label === killed);
    assert.ok(
      !ranWith(killedNow ?? { label: '', phase: '', progress: 0, runs: 0 }, atKill.pid),
      'another worker finished it',
    );
    const workers = new Set(pieces.items.map((p) => p.worker));
    assert.ok(workers.size >= 2, `pieces ran on ${[...workers].join(', ')}`);
    // Chunks cover the whole input, end to end.
    const ranges = chunks.map((c) => rangeOf(c.label)).filter((r) => r !== undefined);
    assert.equal(ranges.length, chunks.length, 'every chunk label names its range');
    ranges.sort((x, y) => x[0] - y[0]);
    assert.equal(ranges[0]?.[0], 0);
    for (let i = 1; i < ranges.length; i++) assert.equal(ranges[i]?.[0], ranges[i - 1]?.[1], 'chunks meet');
    assert.ok((ranges.at(-1)?.[1] ?? 0) >= SECONDS - 0.5, `the last chunk ends at ${ranges.at(-1)?.[1]}`);
  });

  it('leaves no scratch, no pieces in the built-in store and no ffmpeg behind', async () => {
    const scratch = path.join(dataDir, 'scratch');
    await waitFor(async () => !existsSync(scratch) || readdirSync(scratch).length === 0, 10_000, 'scratch to empty');
    assert.equal(existsSync(path.join(dataDir, 'media', 'pieces', taskId)), false, 'pieces/<parentId>/ removed');
    for (const c of children)
      if (c.exitCode === null && c.pid) assert.deepEqual(childrenOf(c.pid, 'ffmpeg'), [], `worker ${c.pid} idle`);
  });

  /** The master's media playlists: each video variant's, each audio rendition's. */
  function masterOf(tree: string): { video: string[]; audio: string[] } {
    const master = readFileSync(path.join(out, tree, 'index.m3u8'), 'utf8');
    const lines = master.split('\n');
    const video = lines.flatMap((l, i) => (l.startsWith('#EXT-X-STREAM-INF') ? [lines[i + 1]?.trim() ?? ''] : []));
    const audio = [...master.matchAll(/#EXT-X-MEDIA:TYPE=AUDIO[^\n]*URI="([^"]+)"/g)].map((m) => m[1] ?? '');
    return { video, audio };
  }

  for (const tree of ['hls', 'fmp4'] as const) {
    it(`${tree}: every segment within the target, timestamps continuous across every seam, audio its own rendition ending within a frame of the video`, async () => {
      const { video, audio } = masterOf(tree);
      assert.deepEqual(video.length, PROFILES.length, `variants of ${tree}/index.m3u8`);
      assert.ok(audio.length >= 1, `${tree}: audio is its own rendition group in chunked mode`);
      const problems: string[] = [];
      const ends: number[] = [];
      for (const v of video) {
        const p = await segmentSpans(path.join(out, tree, v), 'v');
        assert.ok(p.ended, `${v} has EXT-X-ENDLIST`);
        problems.push(...segmentProblems(p, FRAME).map((x) => `${tree}/${v}: ${x}`));
        const total = p.segments.reduce((s, x) => s + x.extinf, 0);
        assert.ok(Math.abs(total - SECONDS) <= FRAME, `${tree}/${v}: ${total} s of segments`);
        ends.push(p.segments.at(-1)?.end ?? 0);
      }
      for (const a of audio) {
        const p = await segmentSpans(path.join(out, tree, a), 'a');
        problems.push(...segmentProblems(p, AAC_FRAME).map((x) => `${tree}/${a}: ${x}`));
        const end = p.segments.at(-1)?.end ?? 0;
        for (const e of ends) assert.ok(Math.abs(end - e) <= FRAME, `${tree}/${a} ends at ${end}, the video at ${e}`);
      }
      assert.deepEqual(problems, []);
    });
  }

  it('DASH: every timeline runs without a hole, matches the fMP4 segments, and lasts the input', async () => {
    const mpd = readMpd(readFileSync(path.join(out, 'fmp4', 'index.mpd'), 'utf8'));
    assert.ok(Math.abs(mpd.duration - SECONDS) < 0.1, `mediaPresentationDuration ${mpd.duration}`);
    const video = mpd.representations.filter((r) => r.contentType === 'video');
    assert.equal(video.length, PROFILES.length);
    assert.ok(mpd.representations.some((r) => r.contentType === 'audio'));
    for (const rep of mpd.representations) {
      assert.deepEqual(timelineProblems(rep), []);
      const dir = path.join(out, 'fmp4');
      // Where ffprobe places a few segments (the first, one at each chunk seam, the last) agrees.
      const kind = rep.contentType === 'video' ? 'v' : 'a';
      const perChunk = Math.round(CHUNK_SECS / SEGMENT_SECS);
      const picks = [...new Set([0, perChunk, 2 * perChunk, rep.segments.length - 1])].filter(
        (n) => n < rep.segments.length,
      );
      for (const n of picks) {
        const number = n + rep.startNumber;
        const segment = path.join(dir, rep.media.replace('$Number$', String(number)));
        const spans = await segmentSpans(await oneSegmentPlaylist(dir, rep.init, segment), kind);
        const s = spans.segments[0];
        const expected = rep.segments[n];
        assert.ok(s && expected);
        assert.ok(
          Math.abs(s.start - expected.start) <= (kind === 'v' ? FRAME : AAC_FRAME),
          `${rep.id} segment ${number}: timeline ${expected.start}, ffprobe ${s.start}`,
        );
      }
      const end = (rep.segments.at(-1)?.start ?? 0) + (rep.segments.at(-1)?.duration ?? 0);
      assert.ok(Math.abs(end - SECONDS) <= 0.1, `${rep.id} ends at ${end}`);
    }
  });

  it('MP4: every frame and audio packet follows the last without a gap, audio ends within a frame of the video', async () => {
    for (const { name } of PROFILES) {
      const file = path.join(out, 'mp4', `${name}.mp4`);
      const v = await packetTimes(file, 'v');
      const a = await packetTimes(file, 'a');
      assert.equal(v.length, SECONDS * FPS, `${name}.mp4: frames`);
      assert.deepEqual(packetGaps(v, FRAME / 2), [], `${name}.mp4 video`);
      assert.deepEqual(packetGaps(a, AAC_FRAME / 2), [], `${name}.mp4 audio`);
      const [vs, as] = [await packetSpan(file, 'v'), await packetSpan(file, 'a')];
      assert.ok(Math.abs(vs.end - as.end) <= FRAME, `${name}.mp4: video ends at ${vs.end}, audio at ${as.end}`);
      assert.ok(moovBeforeMdat(readFileSync(file)), `${name}.mp4 is faststart`);
    }
  });

  it('every output decodes without an error', async () => {
    const files: string[] = [];
    for (const tree of ['hls', 'fmp4']) {
      const { video, audio } = masterOf(tree);
      files.push(...[...video, ...audio].map((p) => path.join(out, tree, p)));
    }
    files.push(...PROFILES.map((p) => path.join(out, 'mp4', `${p.name}.mp4`)));
    for (const f of files) assert.equal(await decodeErrors(f), '', path.relative(out, f));
  });

  describe('in Chromium, across a seam', () => {
    let player: BrowserPlayer | undefined;
    let why = '';
    before(async () => {
      const started = await startBrowserPlayer(s3);
      if ('skip' in started) why = started.skip;
      else player = started;
    });
    after(() => player?.close());
    const bucketUrl = (k: string): string => player?.mediaUrl(bucket, k) ?? k;

    /** A chunk seam: where the killed chunk began (its work was redone), else the second chunk's start. */
    const seam = (): number => {
      const killed = atKill ? rangeOf(atKill.chunk.label)?.[0] : undefined;
      if (killed) return killed;
      const ranges = (task.pieces?.items ?? []).flatMap((p) => (isChunk(p) ? [rangeOf(p.label)] : []));
      return ranges.map((r) => r?.[0] ?? 0).sort((x, y) => x - y)[1] ?? CHUNK_SECS;
    };
    const crossed = (r: PlayResult, at: number, what: string): void => {
      const context = `${what}: ${JSON.stringify({ ...r, levels: r.levels.length, log: r.log.slice(0, 5) })}`;
      assert.equal(r.error, undefined, context);
      assert.ok((r.startedAt ?? Number.NaN) < at, `began before the seam at ${at}: ${context}`);
      assert.ok(r.played >= at + 1, `played past the seam at ${at}: ${context}`);
      assert.ok(
        (r.buffered ?? []).some(([s, e]) => s <= at - 0.5 && e >= at + 0.5),
        `one buffered range across ${at}: ${context}`,
      );
    };

    it('hls.js plays the TS and the fMP4 master across the seam', async (t) => {
      if (!player) return t.skip(why);
      const at = seam();
      for (const tree of ['hls', 'fmp4']) {
        const r = await player.playHls(bucketUrl(`${tree}/index.m3u8`), { start: at - 1.5, seconds: 3, level: 0 });
        crossed(r, at, `hls.js ${tree}`);
      }
    });

    it('shaka-player plays the DASH manifest across the seam', async (t) => {
      if (!player) return t.skip(why);
      const at = seam();
      crossed(await player.playDash(bucketUrl('fmp4/index.mpd'), { start: at - 1.5, seconds: 3 }), at, 'shaka DASH');
    });
  });

  it("the chunked MP4's VMAF is within 0.5 of a single-worker encode's, over windows across two seams", async () => {
    let t = Date.now();
    const single = path.join(work, 'single');
    const config = loadConfig({ env: {}, overrides: { allowPrivateUrls: true, x264Preset: PRESET } });
    await runPipeline(config, {
      source: new FileInput(clip),
      store: new LocalDirStore(path.join(single, 'out')),
      scratchDir: path.join(single, 'scratch'),
      signal: new AbortController().signal,
      progress: () => undefined,
      outputs: { mp4: { path: '/mp4' } },
      profiles: PROFILES,
      segmentSecs: SEGMENT_SECS,
    });
    timings.single = (Date.now() - t) / 1000;
    t = Date.now();
    const top = PROFILES[0]?.name ?? '';
    const scores = { chunked: [] as number[], single: [] as number[] };
    for (const at of [CHUNK_SECS, 3 * CHUNK_SECS]) {
      const window = { ref: clip, from: at - 2, seconds: 4, dir: work };
      scores.chunked.push(await vmafWindow({ ...window, dist: path.join(out, 'mp4', `${top}.mp4`) }));
      scores.single.push(await vmafWindow({ ...window, dist: path.join(single, 'out', 'mp4', `${top}.mp4`) }));
    }
    timings.vmaf = (Date.now() - t) / 1000;
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const [c, s] = [mean(scores.chunked), mean(scores.single)];
    console.log(
      `VMAF ${top} around seams ${CHUNK_SECS} s, ${3 * CHUNK_SECS} s: chunked ${scores.chunked.join(', ')}; single ${scores.single.join(', ')}`,
    );
    assert.ok(Math.abs(c - s) <= 0.5, `mean VMAF chunked ${c.toFixed(2)} against single-worker ${s.toFixed(2)}`);
  });
});

/** A playlist of one fMP4 segment behind its init segment, for segmentSpans(). */
async function oneSegmentPlaylist(dir: string, init: string, segment: string): Promise<string> {
  const file = path.join(dir, `one-${path.basename(segment)}-${Math.random().toString(36).slice(2)}.m3u8`);
  await writeFile(
    file,
    `#EXTM3U\n#EXT-X-TARGETDURATION:${SEGMENT_SECS}\n#EXT-X-MAP:URI="${init}"\n#EXTINF:${SEGMENT_SECS},\n${path.relative(dir, segment)}\n#EXT-X-ENDLIST\n`,
  );
  return file;
}
