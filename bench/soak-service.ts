// The soak's service (bench/soak.ts): one `mediaplane api` process and two worker slots, each a
// `mediaplane` child process writing its log to the work directory; a worker is SIGKILLed with
// a record of what it held and which of its children outlived it, and replaced in its slot.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Db } from '../src/db/index.ts';
import { processTable } from '../test/tasks/procfs.ts';
import type { KillTarget } from './soak-film.ts';

const BIN = fileURLToPath(new URL('../bin/mediaplane.js', import.meta.url));

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const log = (msg: string) => console.log(`[${new Date().toISOString().slice(11, 23)}] ${msg}`);

interface Slot {
  dir: string;
  proc: ChildProcess | undefined;
}

export interface KillRecord {
  at: number;
  pid: number;
  /** The runs it held when it died: reclaim latency is measured from `at` to their next claim. */
  held: { id: string; attempts: number; crashes: number; type: string }[];
  /** What the kill was aimed at. */
  target: KillTarget;
  /** Its children (ffmpeg, ffprobe) at the moment of the kill. */
  children: number[];
}

export class Service {
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
