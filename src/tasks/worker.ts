import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { settings } from '../config/index.ts';
import type { Db } from '../db/index.ts';
import { InternalError, isCallersFault, isMediaplaneError } from '../lib/errors.ts';
import { PollLoop } from '../lib/poll-loop.ts';
import type { TaskRow } from './model.ts';
import { type Queue, type RunKey, runKey } from './queue.ts';
import { retryDelayMs } from './retry-policy.ts';
import { sweepScratch } from './scratch.ts';
import { CHANNEL_CANCEL, CHANNEL_WORK } from './store.ts';
import { type JobContext, type JobHandler, type PieceSpec, SPLIT } from './types.ts';

export interface WorkerOptions {
  db: Db;
  queue: Queue;
  handlers: Record<string, JobHandler>;
  log: Logger;
  scratchRoot: string;
  concurrency: number;
  pollMs: number;
  heartbeatMs: number;
  /** Delay before the first retry after a failure (retry-policy.ts). */
  retryBackoffMs: number;
  /** Longest delay before a retry (default: MEDIAPLANE_RETRY_BACKOFF_MAX_MS's default). */
  retryBackoffMaxMs?: number;
  /** How often progress may be written, at most (default 1000 ms). */
  progressEveryMs?: number;
  workerId?: string;
}

/**
 * Why a running job was stopped from outside; decides what is written afterwards.
 * `lease-expiring`: heartbeats have failed for so long that the lease may run out; the job
 * stops before it does, so that the worker that takes the task back never runs beside it.
 */
type StopReason = 'cancelled' | 'lease-lost' | 'lease-expiring' | 'shutdown';

class StopSignal extends Error {
  readonly reason: StopReason;
  constructor(reason: StopReason) {
    super(reason);
    this.reason = reason;
  }
}

interface RunningJob {
  run: RunKey;
  controller: AbortController;
  done: Promise<void>;
}

/**
 * Knows no SQL (after pg-boss's worker.ts): claim, run the handler with an AbortSignal,
 * heartbeat, record the outcome. A poll loop (lib/poll-loop.ts) woken at once by NOTIFY and
 * when a job ends, polling as a fallback.
 */
export class Worker {
  readonly id: string;
  readonly #o: WorkerOptions;
  readonly #running = new Map<string, RunningJob>();
  readonly #poll: PollLoop;
  #unlisten: Array<() => Promise<void>> = [];
  #lastSweep = 0;

  constructor(opts: WorkerOptions) {
    this.#o = opts;
    this.id = opts.workerId ?? `worker-${process.pid}-${randomUUID().slice(0, 8)}`;
    this.#poll = new PollLoop({
      pass: () => this.#fill(),
      pollMs: opts.pollMs,
      onError: (err) => opts.log.error({ err }, 'worker poll failed; trying again'),
    });
  }

  get activeJobs(): number {
    return this.#running.size;
  }

  async start(): Promise<void> {
    await mkdir(this.#o.scratchRoot, { recursive: true });
    // What earlier workers on this scratch root left behind, before this one adds to it.
    await this.#sweep();
    this.#unlisten.push(await this.#o.db.listen(CHANNEL_WORK, this.#poll.wake));
    this.#unlisten.push(
      await this.#o.db.listen(CHANNEL_CANCEL, (id) =>
        this.#running.get(id)?.controller.abort(new StopSignal('cancelled')),
      ),
    );
    this.#poll.start();
  }

  /**
   * Stops taking jobs, lets running ones finish for up to `graceMs`, then aborts the rest
   * and hands them back to the queue for another worker.
   */
  async stop(graceMs: number): Promise<void> {
    await this.#poll.stop();
    const all = Promise.all([...this.#running.values()].map((r) => r.done));
    const timer = setTimeout(() => {
      for (const r of this.#running.values()) r.controller.abort(new StopSignal('shutdown'));
    }, graceMs);
    await all;
    clearTimeout(timer);
    for (const u of this.#unlisten) await u().catch(() => {});
  }

  async #fill(): Promise<void> {
    // Once a lease period: a dead worker's runs are unheld by then.
    if (Date.now() - this.#lastSweep >= this.#o.queue.leaseMs) await this.#sweep();
    const free = this.#o.concurrency - this.#running.size;
    if (free <= 0 || this.#poll.stopping) return;
    const reaped = await this.#o.queue.reapExpired();
    if (reaped > 0) this.#o.log.warn({ reaped }, 'took back tasks whose worker stopped heartbeating');
    const claimedAt = Date.now();
    const tasks = await this.#o.queue.claim(this.id, free);
    // A task that ran before may have left an encoder on this host: it goes before this run starts.
    if (tasks.some((t) => t.attempts > 1)) await this.#sweep();
    for (const task of tasks) {
      const controller = new AbortController();
      const done = this.#execute(task, controller, claimedAt).finally(() => {
        this.#running.delete(task.id);
        this.#poll.wake();
      });
      this.#running.set(task.id, { run: runKey(task.id, task.attempts), controller, done });
    }
  }

  /** Removes the scratch of runs no live lease holds (scratch.ts); a failure is logged, never thrown. */
  async #sweep(): Promise<void> {
    this.#lastSweep = Date.now();
    try {
      const swept = await sweepScratch({
        root: this.#o.scratchRoot,
        liveRuns: (runs) => this.#o.queue.liveRuns(runs),
        ownRuns: new Set([...this.#running.values()].map((r) => r.run)),
      });
      if (swept.removed.length > 0) this.#o.log.warn(swept, 'removed the scratch of runs whose worker is gone');
    } catch (err) {
      this.#o.log.error({ err }, 'could not sweep the scratch directory');
    }
  }

  async #execute(task: TaskRow, controller: AbortController, claimedAt: number): Promise<void> {
    const log = this.#o.log.child({ taskId: task.id, attempt: task.attempts });
    const scratchDir = join(this.#o.scratchRoot, runKey(task.id, task.attempts));
    const stopLease = this.#keepLease(task.id, controller, { log, since: claimedAt });
    const progress = this.#progressWriter(task.id, log);
    const pieces = this.#pieceContext(task, { controller, progress, stopLease });
    log.info({ type: task.type }, 'task started');
    try {
      const output = await this.#runHandler(task, controller, {
        scratchDir,
        progress: progress.report,
        log,
        ...pieces.ctx,
      });
      // Split: the task's row is its pieces' now, whatever stopped this run after the split.
      if (output === SPLIT && pieces.split()) return log.info('task split into pieces');
      if (output === SPLIT) throw new InternalError('the handler returned SPLIT without splitting the task');
      if (controller.signal.aborted) throw controller.signal.reason;
      const ok = await this.#o.queue.complete(task.id, this.id, output, { parentId: task.parent_id });
      log.info({ recorded: ok }, 'task completed');
    } catch (err) {
      // Nothing awaits a job's promise until shutdown, so a database error while recording
      // the outcome must end here: thrown on, it would be an unhandled rejection (exit).
      // The lease then runs out and the reaper gives the task back.
      await this.#recordFailure(task, controller, err, log).catch((e: unknown) =>
        log.error({ err: e }, 'could not record the task outcome; its lease will expire'),
      );
    } finally {
      stopLease();
      progress.stop();
    }
  }

  /**
   * Runs the handler in its scratch dir and removes the dir before the outcome is written,
   * so a client that sees the task finished also sees its disk space given back.
   */
  async #runHandler(
    task: TaskRow,
    controller: AbortController,
    ctx: Omit<JobContext, 'taskId' | 'attempt' | 'signal'>,
  ): Promise<unknown> {
    const handler = this.#o.handlers[task.type];
    try {
      if (!handler) throw new Error(`no handler for task type ${task.type}`);
      await mkdir(ctx.scratchDir, { recursive: true });
      return await handler(task.params, { taskId: task.id, attempt: task.attempts, signal: controller.signal, ...ctx });
    } finally {
      await rm(ctx.scratchDir, { recursive: true, force: true }).catch((err: unknown) =>
        ctx.log.warn({ err }, 'could not remove scratch dir'),
      );
    }
  }

  async #recordFailure(task: TaskRow, controller: AbortController, err: unknown, log: Logger): Promise<void> {
    const stop = controller.signal.reason;
    if (controller.signal.aborted && stop instanceof StopSignal) {
      // Cancelled or reaped: the row already says so. Shutdown: hand it back untouched.
      // Lease expiring: the database was out of reach; if it is back, the task goes back now
      // rather than when the lease runs out, and costs no crash retry.
      if (stop.reason === 'shutdown' || stop.reason === 'lease-expiring') await this.#o.queue.release(task.id, this.id);
      log[stop.reason === 'lease-expiring' ? 'warn' : 'info']({ reason: stop.reason }, 'task stopped');
      return;
    }
    const known = isMediaplaneError(err);
    const message = known ? err.message : 'internal error while running the task';
    const backoff = {
      baseMs: this.#o.retryBackoffMs,
      maxMs: this.#o.retryBackoffMaxMs ?? settings.retryBackoffMaxMs.default,
    };
    const phase = await this.#o.queue.fail(task.id, this.id, {
      message,
      retryable: known && err.retryable,
      backoffMs: retryDelayMs(task.retries - task.crashes, backoff),
      parentId: task.parent_id,
    });
    // An input that is no video or a URL that answers 404 is the task's own story, told in its
    // error: one line at info. A stack trace is for what the service must look into.
    if (isCallersFault(err)) log.info({ phase, code: err.code }, `task failed: ${message}`);
    else log[known ? 'warn' : 'error']({ err, phase }, 'task failed');
  }

  /**
   * What a job knows of pieces (issue #30): a task splits (ctx.split), a piece sees its parent
   * and siblings. A split ends the run's hold on the task at once: no more heartbeats (the
   * lease is gone, a beat would read as lost) nor progress writes (the pieces' sum takes over).
   * `split()` says whether this run split its task.
   */
  #pieceContext(
    task: TaskRow,
    run: {
      controller: AbortController;
      progress: { latest(): number | undefined; stop(): void };
      stopLease: () => void;
    },
  ): { ctx: Pick<JobContext, 'split' | 'parentId' | 'siblings' | 'playable'>; split: () => boolean } {
    const parentId = task.parent_id;
    if (parentId) {
      const { queue } = this.#o;
      const ctx = { parentId, siblings: () => queue.pieces(parentId), playable: () => queue.markPlayable(parentId) };
      return { ctx, split: () => false };
    }
    let done = false;
    const split = async (pieces: readonly PieceSpec[]): Promise<typeof SPLIT> => {
      if (done) throw new InternalError('the task was split already');
      const unknown = pieces.find((p) => !this.#o.handlers[p.type]);
      if (unknown) throw new InternalError(`piece ${unknown.label}: no handler for task type ${unknown.type}`);
      const ok = await this.#o.queue.split(task.id, this.id, { pieces, progress: run.progress.latest() ?? 0 });
      if (!ok) {
        // Cancelled or taken back meanwhile: stopped like any run that lost its lease.
        run.controller.abort(new StopSignal('lease-lost'));
        throw run.controller.signal.reason;
      }
      done = true;
      run.stopLease();
      run.progress.stop();
      return SPLIT;
    };
    return { ctx: { split }, split: () => done };
  }

  /**
   * Renews the lease every heartbeatMs. A database blip is ridden out (the lease has slack:
   * heartbeat < lease), but once no renewal has gone through for nearly a lease, the job is
   * stopped: the lease counts from when the last renewal that went through was sent (`since`
   * at first: the claim), so it stops before any other worker may take the task back (issue
   * #20: a reclaimed task never runs two encoders at once). Returns the function that stops it.
   */
  #keepLease(id: string, controller: AbortController, o: { log: Logger; since: number }): () => void {
    const leaseMs = this.#o.queue.leaseMs;
    const stopAfter = leaseMs - Math.min(this.#o.heartbeatMs, leaseMs / 4);
    let renewedAt = o.since;
    let fence: NodeJS.Timeout | undefined;
    const arm = (): void => {
      clearTimeout(fence);
      fence = setTimeout(
        () => controller.abort(new StopSignal('lease-expiring')),
        Math.max(0, renewedAt + stopAfter - Date.now()),
      );
    };
    const beat = async (): Promise<void> => {
      const sentAt = Date.now();
      try {
        if (!(await this.#o.queue.heartbeat(id, this.id))) return controller.abort(new StopSignal('lease-lost'));
        // A slow answer to an older beat must not move the fence back.
        if (sentAt > renewedAt && !controller.signal.aborted) {
          renewedAt = sentAt;
          arm();
        }
      } catch (err) {
        o.log.warn({ err, sinceRenewalMs: Date.now() - renewedAt }, 'heartbeat failed');
      }
    };
    arm();
    const timer = setInterval(() => void beat(), this.#o.heartbeatMs);
    return () => {
      clearInterval(timer);
      clearTimeout(fence);
    };
  }

  /** Progress reports are frequent; only the latest is written, at most once per interval. */
  #progressWriter(
    id: string,
    log: Logger,
  ): { report: (f: number) => void; latest: () => number | undefined; stop: () => void } {
    const every = this.#o.progressEveryMs ?? 1000;
    let latest: number | undefined;
    let written: number | undefined;
    const timer = setInterval(() => {
      if (latest === undefined || latest === written) return;
      written = latest;
      this.#o.queue.progress(id, this.id, latest).catch((err: unknown) => log.warn({ err }, 'progress write failed'));
    }, every);
    return {
      report: (f) => {
        if (Number.isFinite(f)) latest = f;
      },
      latest: () => latest,
      stop: () => clearInterval(timer),
    };
  }
}
