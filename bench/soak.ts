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
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, readFileSync, readlinkSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Accounts } from '../src/accounts/index.ts';
import { openDb, type Db } from '../src/db/index.ts';
import { serveFile, startHttp } from '../test/helpers/http-input.ts';
import { makeClip } from '../test/helpers/media.ts';
import { makeLongClip } from '../test/helpers/seams.ts';
import { testPostgres } from '../test/helpers/postgres.ts';
import { startS3, type TestS3 } from '../test/helpers/s3.ts';
import { startOutageProxy, type OutageProxy } from '../test/tasks/outage-proxy.ts';
import { processTable } from '../test/tasks/procfs.ts';
import { freePort } from './child.ts';
import {
  isPieceType,
  type KillTarget,
  leftoverPieces,
  PieceReclaims,
  SPLIT_SETTINGS,
  type SubmissionKind,
  schedule,
  slotsRunning,
  uploadAsset,
} from './soak-film.ts';
import { addOutputs, checkOutputs, type Expected, expectedOf, noOutputs, type OutputCheck } from './soak-outputs.ts';
import { quantile } from './stats.ts';

const BIN = fileURLToPath(new URL('../bin/mediaplane.js', import.meta.url));
const FINAL = ['completed', 'failed', 'cancelled'];

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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rand = (lo: number, hi: number) => lo + Math.random() * (hi - lo);
const log = (msg: string) => console.log(`[${new Date().toISOString().slice(11, 23)}] ${msg}`);

// ---------------------------------------------------------------------------------------
// The service: one API process and two worker slots, each a `mediaplane` child process.

interface Slot {
  dir: string;
  proc: ChildProcess | undefined;
}

interface KillRecord {
  at: number;
  pid: number;
  /** The runs it held when it died: reclaim latency is measured from `at` to their next claim. */
  held: { id: string; attempts: number; crashes: number; type: string }[];
  /** What the kill was aimed at. */
  target: KillTarget;
  /** Its children (ffmpeg, ffprobe) at the moment of the kill. */
  children: number[];
}

class Service {
  readonly apiUrl: string;
  readonly slots: Slot[] = [];
  readonly kills: KillRecord[] = [];
  readonly orphans: number[] = [];
  readonly #env: NodeJS.ProcessEnv;
  readonly #work: string;
  #api: ChildProcess | undefined;
  #starting: Promise<void>[] = [];

  constructor(o: {
    work: string;
    databaseUrl: string;
    apiPort: number;
    leaseMs: number;
    /** The built-in store's and the split's settings, the same for every process. */
    env: Record<string, string>;
  }) {
    this.#work = o.work;
    this.apiUrl = `http://127.0.0.1:${o.apiPort}`;
    this.#env = {
      ...process.env,
      DATABASE_URL: o.databaseUrl,
      MEDIAPLANE_PORT: String(o.apiPort),
      MEDIAPLANE_ALLOW_PRIVATE_URLS: 'true',
      MEDIAPLANE_MAX_QUEUED_PER_OWNER: '100000',
      MEDIAPLANE_LEASE_MS: String(o.leaseMs),
      MEDIAPLANE_HEARTBEAT_MS: String(Math.max(100, Math.round(o.leaseMs / 6))),
      MEDIAPLANE_POLL_MS: '200',
      MEDIAPLANE_LOG_LEVEL: 'info',
      ...o.env,
    };
  }

  async startApi(): Promise<void> {
    this.#api = await this.#start(['api'], path.join(this.#work, 'api'), 'api.log', 'HTTP server listening');
  }

  killApi(): void {
    this.#api?.kill('SIGKILL');
  }

  async startWorker(i: number): Promise<void> {
    const slot = this.slots[i] ?? { dir: path.join(this.#work, `worker-${i}`), proc: undefined };
    this.slots[i] = slot;
    slot.proc = await this.#start(
      ['worker'],
      slot.dir,
      `worker-${i}.log`,
      'worker started',
      // Each worker its own port setting: a worker serves no HTTP, but the setting is shared.
      { MEDIAPLANE_PORT: '0' },
    );
  }

  /** SIGKILLs the worker in slot i and records what it held (the caller starts its replacement). */
  async killWorker(i: number, db: Db, target: KillTarget): Promise<KillRecord | undefined> {
    const pid = this.slots[i]?.proc?.pid;
    if (pid === undefined) return undefined;
    const held = await db.query<{ id: string; attempts: number; crashes: number; type: string }>(
      `SELECT id::text AS id, attempts, crashes, type FROM tasks WHERE phase = 'running' AND lease_owner LIKE $1`,
      [`worker-${pid}-%`],
    );
    const children = processTable()
      .filter((p) => p.ppid === pid)
      .map((p) => p.pid);
    const slot = this.slots[i];
    slot?.proc?.kill('SIGKILL');
    // Dead until its replacement is up: its lease still shows it busy, but it is not killed twice.
    if (slot) slot.proc = undefined;
    const record = { at: Date.now(), pid, held, target, children };
    this.kills.push(record);
    // A child still there a second after its worker died is an orphan.
    setTimeout(() => {
      for (const c of children) if (alive(c)) this.orphans.push(c);
    }, 1000);
    return record;
  }

  /** Starts a replacement in slot i in the background; stop() waits for it. */
  replace(i: number): void {
    const attempt = async (left: number): Promise<void> => {
      try {
        await this.startWorker(i);
      } catch (err) {
        log(`worker ${i} did not restart: ${(err as Error).message}${left > 0 ? '; again' : ''}`);
        if (left > 0) await attempt(left - 1);
      }
    };
    this.#starting.push(attempt(2));
  }

  async stop(): Promise<void> {
    await Promise.all(this.#starting);
    const procs = [this.#api, ...this.slots.map((s) => s.proc)].filter((p): p is ChildProcess => !!p);
    for (const p of procs) p.kill('SIGTERM');
    await Promise.all(procs.map((p) => (p.exitCode === null ? new Promise((r) => p.once('exit', r)) : null)));
  }

  async #start(
    args: string[],
    dataDir: string,
    logName: string,
    ready: string,
    env: Record<string, string> = {},
  ): Promise<ChildProcess> {
    await mkdir(dataDir, { recursive: true });
    const logFile = path.join(this.#work, logName);
    const fd = openSync(logFile, 'a');
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...this.#env, MEDIAPLANE_DATA_DIR: dataDir, ...env },
      stdio: ['ignore', fd, fd],
    });
    closeSync(fd);
    // Three minutes: on a host loaded 10 times over its cores a start took more than one.
    const until = Date.now() + 180_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`mediaplane ${args[0]} exited with ${child.exitCode}`);
      const lines = readFileSync(logFile, 'utf8').split('\n');
      if (lines.some((l) => l.includes(ready) && l.includes(`"pid":${child.pid},`))) return child;
      if (Date.now() > until) {
        // Not left to start later unwatched: a process the bench does not know of would skew every count.
        child.kill('SIGKILL');
        throw new Error(`mediaplane ${args[0]} did not start`);
      }
      await sleep(50);
    }
  }
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------
// Watching encoders: a task with two ffmpeg processes at once in the workers' scratch.

/** Task ids (and the run directory) of every ffmpeg/ffprobe working under these scratch roots now. */
function jobProcesses(roots: string[]): { pid: number; comm: string; task: string }[] {
  const found: { pid: number; comm: string; task: string }[] = [];
  for (const p of processTable()) {
    if (p.comm !== 'ffmpeg' && p.comm !== 'ffprobe') continue;
    let where = '';
    try {
      where = `${readlinkSync(`/proc/${p.pid}/cwd`)}\0${readFileSync(`/proc/${p.pid}/cmdline`, 'utf8')}`;
    } catch {
      continue;
    }
    for (const root of roots) {
      const m = new RegExp(`${root.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/([0-9a-f-]{36})-\\d+`).exec(where);
      if (m?.[1]) found.push({ pid: p.pid, comm: p.comm, task: m[1] });
    }
  }
  return found;
}

class EncoderWatch {
  readonly twiceAtOnce = new Set<string>();
  samples = 0;
  #timer: NodeJS.Timeout | undefined;

  start(roots: () => string[]): void {
    this.#timer = setInterval(() => {
      this.samples++;
      const perTask = new Map<string, number>();
      for (const p of jobProcesses(roots()))
        if (p.comm === 'ffmpeg') perTask.set(p.task, (perTask.get(p.task) ?? 0) + 1);
      for (const [task, n] of perTask) if (n > 1) this.twiceAtOnce.add(task);
    }, 50);
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

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
// What the workers' logs say about runs: two runs of a task whose times overlap.

function overlappingRuns(logs: string[], kills: KillRecord[]): Map<string, string> {
  const killedAt = new Map(kills.map((k) => [k.pid, k.at]));
  const runs = new Map<string, { task: string; pid: number; start: number; end: number }>();
  for (const line of logs.flatMap((l) => l.split('\n')).filter(Boolean)) {
    let e: { msg?: string; taskId?: string; attempt?: number; pid?: number; time?: string | number };
    try {
      e = JSON.parse(line);
    } catch {
      continue;
    }
    if (!e.taskId || e.pid === undefined || e.time === undefined) continue;
    // The service logs ISO times; epoch milliseconds are pino's default.
    const time = typeof e.time === 'string' ? Date.parse(e.time) : e.time;
    const key = `${e.pid}:${e.taskId}:${e.attempt}`;
    if (e.msg === 'task started')
      runs.set(key, { task: e.taskId, pid: e.pid, start: time, end: killedAt.get(e.pid) ?? Infinity });
    else if (e.msg === 'task completed' || e.msg === 'task failed' || e.msg === 'task stopped') {
      const r = runs.get(key);
      if (r) r.end = time;
    }
  }
  const byTask = new Map<string, { pid: number; start: number; end: number }[]>();
  for (const r of runs.values()) byTask.set(r.task, [...(byTask.get(r.task) ?? []), r]);
  const twice = new Map<string, string>();
  for (const [task, rs] of byTask) {
    rs.sort((a, b) => a.start - b.start);
    for (let i = 1; i < rs.length; i++)
      if ((rs[i]?.start ?? 0) < (rs[i - 1]?.end ?? 0))
        twice.set(task, rs.map((r) => `pid ${r.pid} ${r.start}-${r.end}`).join(', '));
  }
  return twice;
}

async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = path.join(dir, e.name);
    total += e.isDirectory()
      ? await dirBytes(p)
      : await stat(p).then(
          (s) => s.size,
          () => 0,
        );
  }
  return total;
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

/** The soak's two inputs: what each holds, for the check of the outputs. */
interface Inputs {
  short: { file: string; expected: Expected };
  long: { file: string; expected: Expected };
}

/** One submission: a transcode (its outputs under soak/<i>/) or an upload (its asset's playback id). */
interface Submitted {
  id: string;
  kind: SubmissionKind;
  input: keyof Inputs;
  /** Where its outputs are in the bucket. */
  prefix: string;
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

interface ReportContext {
  o: Options;
  service: Service;
  db: Db;
  s3: TestS3;
  bucket: string;
  ids: Submitted[];
  inputs: Inputs;
  work: string;
  watch: EncoderWatch;
  reclaims: PieceReclaims;
}

interface TaskFinal {
  id: string;
  parent: string | null;
  phase: string;
  retries: number;
  crashes: number;
  error_message: string | null;
}

/** Every submitted task's outputs (a transcode's under soak/<i>/, an asset's in the store) checked whole. */
async function checkAll(c: ReportContext, finals: TaskFinal[]): Promise<OutputCheck> {
  const into = path.join(c.work, 'bucket');
  const outputs = noOutputs();
  for (const t of c.ids) {
    if (finals.find((p) => p.id === t.id)?.phase !== 'completed') continue;
    const expected = c.inputs[t.input].expected;
    addOutputs(outputs, await checkOutputs({ s3: c.s3, bucket: c.bucket, prefix: t.prefix, expected, into }));
  }
  return outputs;
}

async function report(c: ReportContext): Promise<number> {
  const ids = c.ids.map((t) => t.id);
  // The submitted tasks and their pieces: a piece's crashes and retries are its own.
  const all = await c.db.query<TaskFinal>(
    `SELECT id::text AS id, parent_id::text AS parent, phase, retries, crashes, error_message FROM tasks
     WHERE id = ANY($1::uuid[]) OR parent_id = ANY($1::uuid[])`,
    [ids],
  );
  const phases = all.filter((t) => t.parent === null);
  const count = (p: string) => phases.filter((t) => t.phase === p).length;
  const lost = ids.length - phases.filter((t) => FINAL.includes(t.phase)).length;
  // The workers sweep once a lease period: give them two before counting what is left.
  await sleep(2 * c.o.leaseMs + 1000);
  const roots = c.service.slots.map((s) => path.join(s.dir, 'scratch'));
  const leaked = (await Promise.all(roots.map(dirBytes))).reduce((a, b) => a + b, 0);
  const leftPieces = leftoverPieces(await c.s3.keys(c.bucket));
  const leftover = jobProcesses(roots);
  // A task's from its events, a piece's as the loop saw it (it writes no event).
  const latencies = [...(await reclaimLatencies(c.db, c.service.kills)), ...c.reclaims.latencies];
  const logs = await Promise.all(
    c.service.slots.map((_, i) => readFileSync(path.join(c.work, `worker-${i}.log`), 'utf8')),
  );
  const overlapping = overlappingRuns(logs, c.service.kills);
  const outputs = await checkAll(c, phases);
  const retries = all.reduce((a, t) => a + t.retries, 0);
  const crashes = all.reduce((a, t) => a + t.crashes, 0);
  const mostFailures = Math.max(0, ...all.map((t) => t.retries - t.crashes));
  const kinds = (k: SubmissionKind) => c.ids.filter((t) => t.kind === k).length;
  const aimed = (t: KillTarget) => c.service.kills.filter((k) => k.target === t).length;
  const figures = {
    submitted: ids.length,
    kinds: { short: kinds('short'), long: kinds('long'), uploads: kinds('upload'), pieces: all.length - phases.length },
    completed: count('completed'),
    failed: count('failed'),
    lost,
    workerKills: { total: c.service.kills.length, midPiece: aimed('piece'), midStitch: aimed('stitch') },
    runTwiceAtOnce: { encoders: c.watch.twiceAtOnce.size, logs: overlapping.size, samples: c.watch.samples },
    orphanedProcesses: { afterKill: c.service.orphans.length, atEnd: leftover.length },
    leakedScratchBytes: leaked,
    leakedPieceObjects: leftPieces.length,
    reclaimLatencyMs: {
      n: latencies.length,
      p50: Math.round(quantile(latencies, 0.5)),
      max: latencies.length > 0 ? Math.round(Math.max(...latencies)) : NaN,
    },
    retries: { total: retries, crashes, failures: retries - crashes, mostFailuresOfOneTask: mostFailures },
    outputs: { ...outputs, problems: outputs.problems.length },
  };
  console.log(`
submitted            ${figures.submitted} (${figures.kinds.short} small, ${figures.kinds.long} long, ${figures.kinds.uploads} uploads; ${figures.kinds.pieces} pieces)
completed            ${figures.completed}
failed               ${figures.failed}
lost                 ${figures.lost}
worker kills         ${figures.workerKills.total} (${figures.workerKills.midPiece} aimed mid-piece, ${figures.workerKills.midStitch} mid-stitch; +1 API kill, 1 S3 outage of ${c.o.outageMs} ms)
run twice at once    ${figures.runTwiceAtOnce.encoders} (two encoders alive, ${c.watch.samples} samples), ${figures.runTwiceAtOnce.logs} (overlapping runs in the logs)
orphaned processes   ${figures.orphanedProcesses.afterKill} (alive 1 s after their worker's kill), ${figures.orphanedProcesses.atEnd} (left at the end)
leaked               ${figures.leakedScratchBytes} scratch bytes, ${figures.leakedPieceObjects} pieces' objects in the store
reclaim latency      p50 ${figures.reclaimLatencyMs.p50} ms, max ${figures.reclaimLatencyMs.max} ms (${latencies.length} runs taken back; lease ${c.o.leaseMs} ms)
retries              ${retries} (${crashes} after crashes, ${retries - crashes} after failures; at most ${mostFailures} failure retries for one task or piece)
outputs              ${outputs.objects} objects: ${outputs.playlists} media playlists, ${outputs.segments} segments, ${outputs.mp4s} MP4s; ${outputs.problems.length} problems`);
  for (const p of outputs.problems.slice(0, 20)) console.log(`  ${p}`);
  for (const k of leftPieces.slice(0, 10)) console.log(`  left in the store: ${k}`);
  for (const [task, runs] of overlapping) console.log(`  overlapping runs of ${task}: ${runs}`);
  for (const t of c.watch.twiceAtOnce) console.log(`  two encoders at once: ${t}`);
  for (const t of phases.filter((p) => p.phase === 'failed'))
    console.log(`  failed ${t.id} (${t.crashes} crashes, ${t.retries - t.crashes} failures): ${t.error_message}`);
  console.log(`\n${JSON.stringify(figures)}`);
  const ok =
    figures.completed === ids.length &&
    lost === 0 &&
    figures.runTwiceAtOnce.encoders + figures.runTwiceAtOnce.logs === 0 &&
    figures.orphanedProcesses.afterKill + figures.orphanedProcesses.atEnd === 0 &&
    leaked === 0 &&
    leftPieces.length === 0 &&
    outputs.problems.length === 0;
  return ok ? 0 : 1;
}

/**
 * For each run a killed worker held and that was taken back (the next claim counts one more
 * crash): ms from the kill to that claim. A run that ended in the instant between the
 * bench's look and the kill (completed, or failed into its backoff) is not a reclaim.
 */
async function reclaimLatencies(db: Db, kills: KillRecord[]): Promise<number[]> {
  const out: number[] = [];
  for (const k of kills)
    for (const h of k.held) {
      const rows = await db.query<{ at: Date; crashes: number }>(
        `SELECT created_at AS at, (task->>'crashes')::int AS crashes FROM task_events
         WHERE task_id = $1 AND task->>'phase' = 'running' AND (task->>'attempts')::int > $2
         ORDER BY created_at LIMIT 1`,
        [h.id, h.attempts],
      );
      const next = rows[0];
      if (next && next.crashes > h.crashes) out.push(new Date(next.at).getTime() - k.at);
    }
  return out;
}

process.exitCode = await main();
