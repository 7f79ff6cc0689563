import type { Logger } from './log.ts';

// A periodic sweep of purge jobs (issue #25: retention). It knows no table: each job deletes
// one batch and says how many rows went; the sweep repeats a job while batches come back
// full, up to `maxBatches` a sweep, yielding between batches, so no statement holds its
// locks for long and the event loop keeps serving. Jobs run one after another, in order, so
// a job may rely on the one before it (logs before the deliveries they name). Several
// processes may sweep at once: jobs must skip what another is deleting (SKIP LOCKED).

export interface SweepJob {
  /** What it deletes, for the log. */
  name: string;
  /** Deletes at most `limit` rows; how many it deleted. */
  run(limit: number): Promise<number>;
}

export interface SweepOptions {
  jobs: readonly SweepJob[];
  /** Time between the end of one sweep and the start of the next. */
  everyMs: number;
  /** Rows per statement. */
  batch: number;
  /** Statements per job and sweep; what is left waits for the next sweep. */
  maxBatches?: number;
  log: Pick<Logger, 'info' | 'error'>;
}

const DEFAULT_MAX_BATCHES = 100;

export class Sweeper {
  readonly #o: SweepOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<Record<string, number>> | undefined;
  #stopped = false;

  constructor(o: SweepOptions) {
    this.#o = o;
  }

  /** Sweeps every `everyMs`, the first time one interval after the start. */
  start(): void {
    this.#stopped = false;
    this.#schedule();
  }

  /** Stops sweeping; resolves once a sweep under way has finished its current batch. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running?.catch(() => {});
  }

  /** One sweep now (or the one under way): rows deleted by job name. A failing job is logged, and the next runs. */
  sweep(): Promise<Record<string, number>> {
    this.#running ??= this.#sweep().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.sweep().finally(() => this.#schedule()), this.#o.everyMs);
    // A pending sweep never keeps the process alive.
    this.#timer.unref();
  }

  async #sweep(): Promise<Record<string, number>> {
    const deleted: Record<string, number> = {};
    for (const job of this.#o.jobs) {
      let total = 0;
      try {
        for (let i = 0; i < (this.#o.maxBatches ?? DEFAULT_MAX_BATCHES) && !this.#stopped; i++) {
          const n = await job.run(this.#o.batch);
          total += n;
          if (n < this.#o.batch) break;
          await new Promise((resolve) => setImmediate(resolve));
        }
      } catch (err) {
        this.#o.log.error({ err, job: job.name }, 'retention sweep failed; it is tried again at the next sweep');
      }
      deleted[job.name] = total;
    }
    if (Object.values(deleted).some((n) => n > 0)) this.#o.log.info({ deleted }, 'retention sweep');
    return deleted;
  }
}
