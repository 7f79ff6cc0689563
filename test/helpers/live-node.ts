// A `mediaplane` node in a process of its own (`ingest`: the API with RTMP ingest; `api`;
// `start`), the way the several-nodes tests run them: on one PostgreSQL, each on free ports of
// its own, found ready through /healthz; SIGKILLed as a crashed node is, or stopped gracefully.

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { COMPILE_CACHE_ENV } from './compile-cache.ts';
import { TEST_ENCODE_ENV } from './encode-defaults.ts';
import { freePort } from './ports.ts';

const BIN = fileURLToPath(new URL('../../bin/mediaplane.js', import.meta.url));

export interface LiveNodeProcess {
  child: ChildProcess;
  url: string;
  rtmpPort: number;
  /** The last 8 KB of what the node printed, to say why something failed. */
  output(): string;
  /** SIGKILL: nothing of the node's shutdown runs. Resolves once it is gone. */
  kill(): Promise<void>;
  /** SIGTERM, then SIGKILL after 15 s; removes its data folder. */
  stop(): Promise<void>;
}

/** Every node still running when the test process exits is killed. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

/** The environment of a node: `env` over the tests' encode settings, on free ports of its own. */
async function nodeEnv(env: Record<string, string>, dataDir: string): Promise<Record<string, string>> {
  return {
    ...(process.env as Record<string, string>),
    ...COMPILE_CACHE_ENV,
    ...TEST_ENCODE_ENV,
    MEDIAPLANE_DATA_DIR: dataDir,
    MEDIAPLANE_HOST: '127.0.0.1',
    MEDIAPLANE_PORT: String(await freePort()),
    MEDIAPLANE_RTMP_PORT: String(await freePort()),
    MEDIAPLANE_SRT_PORT: '0',
    MEDIAPLANE_LOG_LEVEL: 'info',
    ...env,
  };
}

/** Starts `mediaplane <command>` and resolves once its /healthz answers (at most 120 s). */
export async function startLiveNode(
  env: Record<string, string>,
  command: 'ingest' | 'api' | 'start' = 'ingest',
): Promise<LiveNodeProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mediaplane-node-'));
  const full = await nodeEnv(env, dataDir);
  const child = spawn(process.execPath, [BIN, command], { env: full, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let tail = '';
  const keep = (b: Buffer) => {
    tail = (tail + b.toString()).slice(-8192);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((r) =>
    child.once('exit', () => {
      running.delete(child);
      r();
    }),
  );
  const url = `http://127.0.0.1:${full.MEDIAPLANE_PORT}`;
  const node: LiveNodeProcess = {
    child,
    url,
    rtmpPort: Number(full.MEDIAPLANE_RTMP_PORT),
    output: () => tail,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(kill);
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`mediaplane ${command} exited with ${child.exitCode}: ${tail}`);
    const up = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) return node;
    if (Date.now() > deadline) {
      await node.stop();
      throw new Error(`mediaplane ${command} did not answer within 120 s: ${tail}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
