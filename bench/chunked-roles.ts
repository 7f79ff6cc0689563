// The processes of bench/chunked.ts: `mediaplane api` and `mediaplane worker` roles in child
// processes (a worker pinned to a core with `taskset -c` when its leg says so), the API
// answering /healthz.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../bin/mediaplane.js', import.meta.url));
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A mediaplane role in a child process (`taskset -c CORE` when pinned); resolves once `ready` matches a line (at once without). */
export async function startRole(
  args: string[],
  env: NodeJS.ProcessEnv,
  o: { core?: number | undefined; ready?: (line: string) => boolean },
): Promise<{ child: ChildProcess; stop(): Promise<void> }> {
  const [cmd, argv] =
    o.core === undefined
      ? [process.execPath, [BIN, ...args]]
      : ['taskset', ['-c', String(o.core), process.execPath, BIN, ...args]];
  const child = spawn(cmd, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  await new Promise<void>((resolve, reject) => {
    const onData = (b: Buffer): void => {
      tail = (tail + b.toString()).slice(-4000);
      if (o.ready && tail.split('\n').some(o.ready)) resolve();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (b: Buffer) => {
      tail = (tail + b.toString()).slice(-4000);
    });
    child.once('exit', (code) => reject(new Error(`mediaplane ${args[0]} exited with ${code}: ${tail}`)));
    if (!o.ready) resolve();
  });
  return {
    child,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(t);
    },
  };
}

/** The API process on `env`'s database, answering /healthz. */
export async function startApi(env: NodeJS.ProcessEnv, url: string): Promise<{ stop(): Promise<void> }> {
  const api = await startRole(['api'], env, {});
  for (
    let i = 0;
    !(await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    ));
    i++
  ) {
    if (i > 600) {
      await api.stop();
      throw new Error('mediaplane api did not answer');
    }
    await sleep(100);
  }
  return api;
}
