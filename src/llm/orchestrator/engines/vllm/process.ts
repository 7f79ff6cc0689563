// The vLLM server as a child process of the orchestrator: its command line (the tuning variables
// as vLLM's own flags), its start-up until /health answers, and its stop. The child dies with
// the orchestrator however that ends (issue #26, as ffmpeg dies with its worker): it is started
// with lib/tied-process.ts, in a process group of its own, so a Ctrl-C at the orchestrator's
// terminal reaches the orchestrator alone, which then stops vLLM with SIGTERM (close()).

import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import type { Logger } from 'pino';
import { UpstreamUnavailableError, ValidationError } from '../../../../lib/errors.ts';
import { killGroup, spawnTied } from '../../../../lib/tied-process.ts';
import type { EffectiveTuning } from '../../tuning.ts';

/** How long vLLM gets to stop after SIGTERM before its process group is SIGKILLed. */
const STOP_GRACE_MS = 10_000;
/** Lines of vLLM's output kept to explain a failed start. */
const TAIL_LINES = 20;

/** The vLLM command line for a model and the tuning variables (vLLM's flag names). */
export function vllmArgs(opts: { model: string; servedName: string; port: number; tuning: EffectiveTuning }): string[] {
  const t = opts.tuning;
  return [
    opts.model,
    '--host',
    '127.0.0.1',
    '--port',
    String(opts.port),
    '--served-model-name',
    opts.servedName,
    '--tensor-parallel-size',
    String(t.tensorParallelSize),
    '--pipeline-parallel-size',
    String(t.pipelineParallelSize),
    '--max-model-len',
    String(t.maxModelLen),
    '--max-num-batched-tokens',
    String(t.maxNumBatchedTokens),
    '--max-num-seqs',
    String(t.maxNumSeqs),
    '--gpu-memory-utilization',
    String(t.gpuMemoryUtilization),
    // 8-bit: FP8 weights (dynamic quantization) and an FP8 KV cache.
    ...(t.use8bit ? ['--quantization', 'fp8', '--kv-cache-dtype', 'fp8'] : []),
  ];
}

/** A free port on the loopback for the child to listen on. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

export interface VllmServerOptions {
  /** Program and leading arguments, e.g. ['vllm', 'serve']. */
  command: readonly string[];
  startTimeoutMs: number;
  log: Logger;
}

/** One vLLM server at `base`: started here (spawn) or reached there; healthy once /health answered. */
export class VllmServer {
  readonly #opts: VllmServerOptions;
  #base = '';
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #stderrTail: string[] = [];
  #healthy = false;

  constructor(opts: VllmServerOptions) {
    this.#opts = opts;
  }

  get base(): string {
    return this.#base;
  }

  get healthy(): boolean {
    return this.#healthy;
  }

  /** Reaches a server already running at `url`. */
  reach(url: string): void {
    this.#base = url.replace(/\/+$/, '');
  }

  /** Starts `vllm serve` with `args` (vllmArgs), listening on `port`. */
  spawn(args: string[], port: number): void {
    const [cmd, ...lead] = this.#opts.command;
    if (!cmd) throw new ValidationError('MEDIAPLANE_VLLM_COMMAND: must name a program');
    this.#base = `http://127.0.0.1:${port}`;
    const { child } = spawnTied(cmd, [...lead, ...args]);
    this.#child = child;
    this.#opts.log.info({ command: [cmd, ...lead, ...args].join(' '), pid: child.pid }, 'starting vLLM');
    const keep = (buf: Buffer): void => {
      for (const line of buf.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        this.#stderrTail.push(line);
        if (this.#stderrTail.length > TAIL_LINES) this.#stderrTail.shift();
        this.#opts.log.debug({ engine: 'vllm' }, line);
      }
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    this.#exited = new Promise((resolve) => {
      child.once('error', (err) => {
        this.#stderrTail.push(err.message);
        resolve();
      });
      child.once('exit', (code, signal) => {
        if (this.#healthy) this.#opts.log.error({ code, signal }, 'vLLM exited');
        this.#healthy = false;
        resolve();
      });
    });
  }

  /** Waits for /health (`model` for the log); throws when the child exits first or the time runs out. */
  async waitHealthy(model: string): Promise<void> {
    const deadline = Date.now() + this.#opts.startTimeoutMs;
    let gone = false;
    void this.#exited.then(() => {
      if (this.#child) gone = true;
    });
    while (Date.now() < deadline) {
      if (gone)
        throw new UpstreamUnavailableError(
          `vLLM exited during start-up: ${this.#stderrTail.slice(-5).join(' | ') || 'no output'}`,
        );
      const ok = await fetch(`${this.#base}/health`, { signal: AbortSignal.timeout(2000) }).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) {
        this.#healthy = true;
        this.#opts.log.info({ url: this.#base, model }, 'vLLM ready');
        return;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    await this.close();
    throw new UpstreamUnavailableError(
      `vLLM did not answer ${this.#base}/health within ${this.#opts.startTimeoutMs} ms`,
    );
  }

  /** SIGTERM to the child, then SIGKILL to its process group (what vLLM started) after a grace. */
  async close(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => killGroup(child.pid), STOP_GRACE_MS);
    await this.#exited;
    clearTimeout(timer);
  }
}
