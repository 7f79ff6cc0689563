// (a)'s side of bench/transcode.ts's ladder leg: `mediaplane start` in a child process, a task
// through its API followed to the end, and where the task's time went, from the service's log.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from './child.ts';
import { config, run } from './transcode-measure.ts';

/** 0 (default): (a) follows GET /api/task/{id}/events; else how often it polls GET /api/task/{id}, in ms. */
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 0);

const BIN = fileURLToPath(new URL('../bin/mediaplane.js', import.meta.url));

export interface Service {
  pid: number;
  url: string;
  key: string;
  /** The service's log lines (pino JSON) so far, for where the time of (a) went. */
  logLines: string[];
  /** The service process's high-water RSS (VmHWM), read from /proc while it runs. */
  peakRssMb(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * `mediaplane start` in a child process, as an operator runs it: the bench's own work
 * (the input server, s3rver, polling) does not share the service's event loop.
 */
export async function startService(dataDir: string): Promise<Service> {
  const env = {
    ...process.env,
    MEDIAPLANE_DATA_DIR: dataDir,
    MEDIAPLANE_PORT: String(await freePort()),
    MEDIAPLANE_HOST: '127.0.0.1',
    MEDIAPLANE_ALLOW_PRIVATE_URLS: 'true',
    MEDIAPLANE_X264_PRESET: config.x264Preset,
    MEDIAPLANE_LOG_LEVEL: 'info',
    // (b) is the fixed ladder's command: (a) encodes the same (issue #31's per-title analysis
    // and its capped-CRF rates are measured by bench/per-title.ts).
    MEDIAPLANE_PER_TITLE: process.env.BENCH_PER_TITLE === '1' ? 'true' : 'false',
    // e.g. --cpu-prof --cpu-prof-dir=/tmp/prof: where the service's own CPU goes during (a).
    ...(process.env.BENCH_SERVICE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVICE_NODE_OPTIONS } : {}),
  };
  // Keys work with or without a running server; made first, the service starts with it.
  const key = (await run(process.execPath, [BIN, 'keys', 'create', '--owner', 'bench'], { env })).stdout.trim();
  const child = spawn(process.execPath, [BIN, 'start'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const keep = (b: Buffer): void => {
    tail = (tail + b.toString()).slice(-4000);
  };
  const logLines: string[] = [];
  let partial = '';
  child.stdout?.on('data', (b: Buffer) => {
    keep(b);
    const lines = (partial + b.toString()).split('\n');
    partial = lines.pop() ?? '';
    logLines.push(...lines.filter((l) => l.includes('"taskId"')));
  });
  child.stderr?.on('data', keep);
  const url = `http://127.0.0.1:${env.MEDIAPLANE_PORT}`;
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`mediaplane start exited with ${child.exitCode}: ${tail}`);
    const ok = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`mediaplane start did not answer: ${tail}`);
    await sleep(100);
  }
  return {
    pid: child.pid ?? 0,
    url,
    key,
    logLines,
    async peakRssMb() {
      const status = await readFile(`/proc/${child.pid}/status`, 'utf8').catch(() => '');
      return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
    },
    stop: () => stopChild(child, exited),
  };
}

async function stopChild(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(t);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * POST /api/transcode, then follow the task to its end; answers the task's id and the POST's
 * time. It follows GET /api/task/{id}/events (SSE: the service pushes each change, and the end
 * arrives the moment it happens) unless BENCH_POLL_MS asks for polling GET /api/task/{id}.
 * Polling every 100 ms, as this bench did before issue #30, cost the service about 4-6 ms of
 * CPU per request on the embedded database (the key check, the task's read, the pieces view's
 * read, two log lines): a second or more of the service's CPU per task, taken from ffmpeg on
 * two cores, and counted against the pipeline. A client that polls pays that cost itself.
 */
export async function transcodeThroughApi(service: Service, body: unknown): Promise<{ id: string; posted: number }> {
  const headers = { authorization: `Bearer ${service.key}`, 'content-type': 'application/json' };
  const posted = Date.now();
  const res = await fetch(`${service.url}/api/transcode`, { method: 'POST', headers, body: JSON.stringify(body) });
  const task = (await res.json()) as { id?: string; errors?: string[] };
  if (!res.ok || !task.id) throw new Error(`POST /api/transcode answered ${res.status}: ${JSON.stringify(task)}`);
  const ended = (json: unknown): boolean => {
    const got = json as { status: { phase: string; errorMessage?: string } };
    if (got.status.phase === 'failed' || got.status.phase === 'cancelled')
      throw new Error(`the task ${got.status.phase}: ${got.status.errorMessage ?? ''}`);
    return got.status.phase === 'completed';
  };
  if (POLL_MS > 0) {
    for (;;) {
      await sleep(POLL_MS);
      if (ended(await (await fetch(`${service.url}/api/task/${task.id}`, { headers })).json()))
        return { id: task.id, posted };
    }
  }
  const events = await fetch(`${service.url}/api/task/${task.id}/events`, { headers });
  if (!events.ok || !events.body) throw new Error(`GET /api/task/{id}/events answered ${events.status}`);
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of events.body) {
    buffered += decoder.decode(chunk, { stream: true });
    const frames = buffered.split('\n\n');
    buffered = frames.pop() ?? '';
    for (const frame of frames) {
      const data = frame
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n');
      if (!data || !/^event: task$/m.test(frame)) continue;
      if (ended(JSON.parse(data))) {
        await events.body.cancel().catch(() => undefined);
        return { id: task.id, posted };
      }
    }
  }
  throw new Error(`the event stream of task ${task.id} ended before the task did`);
}

/** Seconds from the POST to each step the worker logs for one task: where the time of (a) went. */
export function phases(lines: string[], task: { id: string; posted: number }): string {
  const { posted } = task;
  const steps = ['task started', 'input fetched', 'ladder planned', 'encoded', 'task completed'];
  const at = new Map<string, number>();
  for (const line of lines) {
    try {
      const { msg, time, taskId } = JSON.parse(line) as { msg?: string; time?: string | number; taskId?: string };
      if (taskId === task.id && msg && time !== undefined && steps.includes(msg) && !at.has(msg))
        at.set(msg, new Date(time).getTime());
    } catch {}
  }
  return (
    steps.map((s) => `${s} +${(((at.get(s) ?? NaN) - posted) / 1000).toFixed(2)} s`).join(', ') +
    ' (from the service log)'
  );
}
