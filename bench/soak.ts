// Crash soak, not part of `npm test`:  node bench/soak.ts [--tasks 100]
//
// N small transcode tasks, L long ones that the workers split into pieces (audio pieces,
// chunks, a stitch) and U uploads (a direct PUT to the URL of POST /api/asset/request-upload,
// short and long inputs in turn) that become assets in the built-in store (a bucket), through
// one `mediaplane api` process and two `mediaplane worker` processes on a real PostgreSQL
// (test/helpers/postgres.ts), the way an operator runs them, while the bench SIGKILLs a
// random busy worker every 4-10 s (a replacement starts at once on the dead one's data
// directory), some of those kills aimed at a worker running a piece (an audio piece or a
// chunk) and some, as soon as one runs, at a worker running a stitch; SIGKILLs the API once
// (restarted a second later; submissions go on with their Idempotency-Key, uploads on their
// URL), and takes the S3 server (outputs and the built-in store) down once. Then it prints:
//   submitted, completed, failed, lost (submitted, never finished)
//   run twice at once: tasks (pieces included) with two encoders alive at the same moment
//     (sampled from /proc every 50 ms), and tasks whose runs overlap in the workers' logs (a
//     killed run ends at its kill)
//   orphaned processes: children of a killed worker still alive 1 s after it, and any
//     ffmpeg/ffprobe left in the soak's scratch directories at the end
//   leaked: what is left under the workers' scratch directories at the end, and the pieces'
//     intermediate objects left in the store
//   reclaim latency p50/max: from a worker's kill to the next claim of each task it held
//   outputs: every task's and asset's objects in the bucket: each playlist's segments present,
//     every rendition playlist and MP4 decoded whole by ffprobe (-count_frames: the input's
//     frames; an audio rendition the input's audio)
//
// Options: --tasks N (100), --long L (10% of N), --uploads U (10% of N), --kills K (30% of N,
// --piece-kills and --stitch-kills of them aimed: L/2 and L/4, at least 1 each with L > 0),
// --outage-ms (10000: the S3 outage), --lease-ms (3000: MEDIAPLANE_LEASE_MS of the workers;
// the other retry settings are the defaults), --rate (submissions per second, 4). Exit status
// 1 when a check fails. Linux only (/proc).
import os from 'node:os';
import path from 'node:path';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { Accounts } from '../src/accounts/index.ts';
import { openDb, type Db } from '../src/db/index.ts';
import { serveFile, startHttp } from '../test/helpers/http-input.ts';
import { makeClip } from '../test/helpers/media.ts';
import { makeLongClip } from '../test/helpers/seams.ts';
import { testPostgres } from '../test/helpers/postgres.ts';
import { startS3 } from '../test/helpers/s3.ts';
import { startOutageProxy, type OutageProxy } from '../test/tasks/outage-proxy.ts';
import { freePort } from './child.ts';
import {
  type Inputs,
  isPieceType,
  type KillTarget,
  PieceReclaims,
  SPLIT_SETTINGS,
  type SubmissionKind,
  type Submitted,
  schedule,
  slotsRunning,
  uploadAsset,
} from './soak-film.ts';
import { expectedOf } from './soak-outputs.ts';
import { FINAL, report } from './soak-report.ts';
import { type KillRecord, log, Service, sleep } from './soak-service.ts';
import { EncoderWatch } from './soak-watch.ts';

interface Options {
  tasks: number;
  long: number;
  uploads: number;
  kills: number;
  pieceKills: number;
  stitchKills: number;
  outageMs: number;
  leaseMs: number;
  rate: number;
  /** Keep the work directory (logs, data dirs, the downloaded bucket) and print where it is. */
  keep: boolean;
}

function options(): Options {
  const { values } = parseArgs({
    options: {
      tasks: { type: 'string', default: '100' },
      long: { type: 'string' },
      uploads: { type: 'string' },
      kills: { type: 'string' },
      'piece-kills': { type: 'string' },
      'stitch-kills': { type: 'string' },
      'outage-ms': { type: 'string', default: '10000' },
      'lease-ms': { type: 'string', default: '3000' },
      rate: { type: 'string', default: '4' },
      keep: { type: 'boolean', default: false },
    },
  });
  const tasks = Number(values.tasks);
  const long = values.long === undefined ? Math.round(tasks * 0.1) : Number(values.long);
  const given = (v: string | undefined, otherwise: number): number => (v === undefined ? otherwise : Number(v));
  return {
    tasks,
    long,
    uploads: given(values.uploads, Math.round(tasks * 0.1)),
    kills: given(values.kills, Math.round(tasks * 0.3)),
    pieceKills: given(values['piece-kills'], long > 0 ? Math.max(1, Math.round(long / 2)) : 0),
    stitchKills: given(values['stitch-kills'], long > 0 ? Math.max(1, Math.round(long / 4)) : 0),
    outageMs: Number(values['outage-ms']),
    leaseMs: Number(values['lease-ms']),
    rate: Number(values.rate),
    keep: values.keep,
  };
}

const rand = (lo: number, hi: number) => lo + Math.random() * (hi - lo);

// ---------------------------------------------------------------------------------------
// Submitting: each task once, whatever the API does meanwhile (Idempotency-Key).

async function submit(o: { url: () => string; key: string; body: unknown; idempotencyKey: string }): Promise<string> {
  const until = Date.now() + 120_000;
  for (;;) {
    try {
      const res = await fetch(`${o.url()}/api/transcode`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${o.key}`,
          'content-type': 'application/json',
          'idempotency-key': o.idempotencyKey,
        },
        body: JSON.stringify(o.body),
        signal: AbortSignal.timeout(10_000),
      });
      const body = (await res.json()) as { id?: string };
      if (res.ok && body.id) return body.id;
      if (res.status < 500 && res.status !== 409 && res.status !== 429)
        throw new Error(`POST /api/transcode answered ${res.status}: ${JSON.stringify(body)}`);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('POST /api/transcode answered')) throw err;
    }
    if (Date.now() > until) throw new Error('could not submit a task for 2 minutes');
    await sleep(250);
  }
}

// ---------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const o = options();
  log(
    `soak: ${o.tasks} small tasks, ${o.long} long (split), ${o.uploads} uploads; ${o.kills} worker kills (${o.pieceKills} mid-piece, ${o.stitchKills} mid-stitch), 1 API kill, one ${o.outageMs} ms S3 outage, lease ${o.leaseMs} ms; ${os.cpus().length} CPUs`,
  );
  const pg = await testPostgres();
  if (!pg) throw new Error('no PostgreSQL: apt-get install postgresql, or set MEDIAPLANE_TEST_DATABASE_URL');
  const databaseUrl = await pg.createDatabase();
  const work = await mkdtemp(path.join(os.tmpdir(), 'mediaplane-soak-'));
  const clip = await makeClip({ width: 640, height: 360, seconds: 4 });
  // Over the workers' 10 s threshold: five 4 s chunks and five audio pieces, then the stitch.
  const longClip = await makeLongClip({ width: 640, height: 360, seconds: 20 });
  const inputs: Inputs = {
    short: { file: clip, expected: await expectedOf(clip) },
    long: { file: longClip, expected: await expectedOf(longClip) },
  };
  const [s3, web] = await Promise.all([
    // The signature-checking S3 (as the built-in store's tests use): s3rver alone refuses the store's requests.
    startS3(),
    startHttp({ '/clip.mp4': serveFile(clip), '/long.mp4': serveFile(longClip) }),
  ]);
  const proxy = await startOutageProxy(s3.endpoint);
  const bucket = await s3.createBucket();
  const db = await openDb({ databaseUrl, poolSize: 2 });
  const key = (await new Accounts(db, { authCacheMs: 0 }).createKey('soak')).key;
  // The built-in store (assets) in the same bucket under store/, behind the same outage.
  const env = {
    ...SPLIT_SETTINGS,
    MEDIAPLANE_STORE_URL: `s3://${bucket}/store`,
    MEDIAPLANE_STORE_ENDPOINT: proxy.endpoint,
    MEDIAPLANE_STORE_REGION: s3.region,
    MEDIAPLANE_STORE_ACCESS_KEY_ID: s3.credentials.accessKeyId,
    MEDIAPLANE_STORE_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
  };
  const service = new Service({ work, databaseUrl, apiPort: await freePort(), leaseMs: o.leaseMs, env });
  const watch = new EncoderWatch();
  const reclaims = new PieceReclaims();
  try {
    await service.startApi();
    await Promise.all([service.startWorker(0), service.startWorker(1)]);
    watch.start(() => service.slots.map((s) => path.join(s.dir, 'scratch')));
    const started = Date.now();
    const ids = await load({
      o,
      service,
      db,
      proxy,
      s3Endpoint: proxy.endpoint,
      bucket,
      key,
      web: { short: web.url('/clip.mp4'), long: web.url('/long.mp4') },
      inputs,
      reclaims,
    });
    log(`all ${ids.length} tasks final after ${((Date.now() - started) / 1000).toFixed(1)} s; checking`);
    watch.stop();
    const code = await report({ o, service, db, s3, bucket, ids, inputs, work, watch, reclaims });
    if (o.keep) {
      const events = await db.query('SELECT task_id, event, created_at, task FROM task_events ORDER BY created_at, id');
      await writeFile(path.join(work, 'task_events.json'), JSON.stringify(events, null, 1));
    }
    return code;
  } finally {
    watch.stop();
    await service.stop().catch(() => undefined);
    await db.close();
    await proxy.close();
    await Promise.all([s3.close(), web.close()]);
    await pg.stop();
    if (o.keep) log(`kept ${work}`);
    else await rm(work, { recursive: true, force: true });
  }
}

interface LoadContext {
  o: Options;
  service: Service;
  db: Db;
  proxy: OutageProxy;
  s3Endpoint: string;
  bucket: string;
  key: string;
  web: { short: string; long: string };
  inputs: Inputs;
  reclaims: PieceReclaims;
}

/** Submits the i-th of the schedule: a transcode of the short or the long input, or an upload. */
async function submitOne(c: LoadContext, i: number, kind: SubmissionKind, uploads: number): Promise<Submitted> {
  if (kind === 'upload') {
    // Uploads alternate the long input (split) and the short one.
    const input = uploads % 2 === 0 ? 'long' : 'short';
    const a = await uploadAsset({
      url: () => c.service.apiUrl,
      key: c.key,
      file: c.inputs[input].file,
      name: `soak ${i}`,
    });
    return { id: a.taskId, kind, input, prefix: `store/asset/${a.playbackId}` };
  }
  const body = {
    input: { url: c.web[kind] },
    storage: {
      type: 's3',
      endpoint: c.s3Endpoint,
      bucket: c.bucket,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    },
    outputs: { hls: { path: `/soak/${i}/hls` }, mp4: { path: `/soak/${i}/mp4` } },
    // Two segments per playlist from a 4 s clip.
    targetSegmentSizeSecs: 2,
  };
  const id = await submit({ url: () => c.service.apiUrl, key: c.key, body, idempotencyKey: `soak-${i}` });
  return { id, kind, input: kind, prefix: `soak/${i}` };
}

/** Submits every task while killing workers, the API once and S3 once; resolves with the task ids once all are final. */
async function load(c: LoadContext): Promise<Submitted[]> {
  const submitted: Submitted[] = [];
  const kinds = schedule(c.o);
  let done = 0;
  const submitting = (async () => {
    let uploads = 0;
    for (const [i, kind] of kinds.entries()) {
      if (i === Math.floor(kinds.length / 2)) void killApi(c.service);
      submitted.push(await submitOne(c, i, kind, kind === 'upload' ? uploads++ : uploads));
      await sleep(1000 / c.o.rate);
    }
  })();
  // The submitted tasks only: a split task's pieces are tasks too.
  const finals = async () =>
    (
      await c.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM tasks WHERE id = ANY($1::uuid[]) AND phase = ANY($2)`,
        [submitted.map((x) => x.id), FINAL],
      )
    )[0]?.n ?? 0;
  let outage: 'before' | 'during' | 'after' = 'before';
  const deadline = Date.now() + 30 * 60_000;
  let nextKill = Date.now() + rand(4000, 10_000);
  for (;;) {
    done = await finals();
    await c.reclaims.poll(c.db);
    if (outage === 'before' && done >= kinds.length * 0.3) {
      outage = 'during';
      log(`S3 down (${done} tasks final)`);
      c.proxy.down();
      setTimeout(() => {
        c.proxy.up();
        outage = 'after';
        log('S3 up');
      }, c.o.outageMs);
    }
    const aimed = (t: KillTarget) => c.service.kills.filter((k) => k.target === t).length;
    const stitchesLeft = Math.max(0, c.o.stitchKills - aimed('stitch'));
    const piecesLeft = Math.max(0, c.o.pieceKills - aimed('piece'));
    // A stitch is short: the kill aimed at one is made as soon as one is seen running. The
    // other kills leave room for the aimed ones, which wait for a piece or a stitch to run.
    if (stitchesLeft > 0 && c.service.kills.length < c.o.kills) await killBusyWorker(c, 'stitch');
    if (c.service.kills.length < c.o.kills - stitchesLeft && Date.now() >= nextKill) {
      let k = piecesLeft > 0 ? await killBusyWorker(c, 'piece') : undefined;
      if (!k && c.service.kills.length < c.o.kills - stitchesLeft - piecesLeft) k = await killBusyWorker(c, 'any');
      if (k) nextKill = Date.now() + rand(4000, 10_000);
    }
    if (submitted.length === kinds.length && done >= kinds.length) break;
    if (Date.now() > deadline) {
      log('deadline: stopping with tasks unfinished');
      break;
    }
    await sleep(200);
  }
  await submitting;
  return submitted;
}

async function killApi(service: Service): Promise<void> {
  log('API killed (SIGKILL); restarting in 1 s');
  service.killApi();
  await sleep(1000);
  for (let left = 2; ; left--) {
    try {
      await service.startApi();
      break;
    } catch (err) {
      log(`API did not restart: ${(err as Error).message}${left > 0 ? '; again' : ''}`);
      if (left === 0) throw err;
    }
  }
  log('API back');
}

/** Kills a worker that is running something of the target's kind, when one is; the kill's record. */
async function killBusyWorker(c: LoadContext, target: KillTarget): Promise<KillRecord | undefined> {
  const busy = await slotsRunning(
    c.db,
    c.service.slots.map((s) => s.proc?.pid),
    target,
  );
  if (busy.length === 0) return undefined;
  const i = busy[Math.floor(Math.random() * busy.length)] ?? 0;
  const k = await c.service.killWorker(i, c.db, target);
  if (!k) return undefined;
  c.reclaims.watch(
    k.held.filter((h) => isPieceType(h.type)),
    k.at,
  );
  const held = k.held.map((h) => `${h.id.slice(0, 8)}-${h.attempts} (${h.type})`).join(' ') || 'nothing';
  log(
    `worker ${i} (pid ${k.pid}) killed (${target}) holding ${held}, ${k.children.length} child process(es); replacing it`,
  );
  // Started in the background: the kills go on meanwhile (a slot whose replacement is still
  // starting holds no lease, so it is not picked), as when a supervisor restarts a process.
  c.service.replace(i);
  return k;
}

process.exitCode = await main();
