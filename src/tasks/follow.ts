import type { Db } from '../db/index.ts';
import type { TaskRow } from './model.ts';
import type { Phase } from './types.ts';

// Following one task as it changes (GET /api/task/{id}/events, issue #18). One LISTEN per
// process, whatever the number of streams: the follower listens on its channels once, on the
// first follow, and fans each NOTIFY (payload: a task id) out to the streams of that task.
// A stream that ends (its task ended, its client went away) removes its waiter, so nothing
// is left behind it. A lost NOTIFY (a dropped connection to PostgreSQL) only delays a stream:
// each also re-reads its task every `pollMs`.

/** Phases after which a task changes no more unless retried: its stream ends there. */
export const FINAL_PHASES: readonly Phase[] = ['completed', 'failed', 'cancelled'];

export interface FollowOptions {
  /** Ends the stream (the client went away, the server stops). */
  signal: AbortSignal;
  /** How often the task is re-read without a NOTIFY (default 2000 ms). */
  pollMs?: number | undefined;
}

const DEFAULT_POLL_MS = 2000;

type Waker = () => void;

export class TaskFollower {
  readonly #db: Db;
  readonly #channels: readonly string[];
  /** Waiters by task id; an entry is deleted with its last waiter. */
  readonly #waiters = new Map<string, Set<Waker>>();
  #listening: Promise<void> | undefined;

  constructor(db: Db, channels: readonly string[]) {
    this.#db = db;
    this.#channels = channels;
  }

  /** Streams following a task now (for tests: it drops to 0 once they end). */
  get size(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }

  /**
   * The task `read` returns, now and after each change of phase, progress or update time,
   * until a final phase (yielded, then the generator returns) or until `signal` aborts.
   */
  async *follow(o: FollowOptions & { id: string; read: () => Promise<TaskRow> }): AsyncGenerator<TaskRow> {
    const wake = new Wakeup();
    // Subscribed before the first read, so no change between the read and the LISTEN is lost.
    this.#add(o.id, wake.fire);
    try {
      await this.#listen();
      let last = await o.read();
      yield last;
      while (!FINAL_PHASES.includes(last.phase)) {
        await wake.wait(o.pollMs ?? DEFAULT_POLL_MS, o.signal);
        if (o.signal.aborted) return;
        const now = await o.read();
        if (changed(last, now)) yield now;
        last = now;
      }
    } finally {
      this.#remove(o.id, wake.fire);
    }
  }

  #listen(): Promise<void> {
    this.#listening ??= (async () => {
      for (const channel of this.#channels) await this.#db.listen(channel, (id) => this.#fire(id));
    })().catch((err: unknown) => {
      // Retried by the next stream; this one fails (before its first event, a 500).
      this.#listening = undefined;
      throw err;
    });
    return this.#listening;
  }

  #fire(id: string): void {
    for (const w of this.#waiters.get(id) ?? []) w();
  }

  #add(id: string, w: Waker): void {
    const set = this.#waiters.get(id) ?? new Set();
    set.add(w);
    this.#waiters.set(id, set);
  }

  #remove(id: string, w: Waker): void {
    const set = this.#waiters.get(id);
    set?.delete(w);
    if (set?.size === 0) this.#waiters.delete(id);
  }
}

function changed(a: TaskRow, b: TaskRow): boolean {
  return (
    a.phase !== b.phase ||
    a.progress !== b.progress ||
    new Date(a.updated_at).getTime() !== new Date(b.updated_at).getTime()
  );
}

/** A wake-up that is not lost when it fires while nobody waits (a change during a read). */
class Wakeup {
  #pending = false;
  #resolve: (() => void) | undefined;

  readonly fire = (): void => {
    this.#pending = true;
    this.#resolve?.();
  };

  /** Resolves on a fire (also one since the last wait), after `ms`, or on abort. */
  async wait(ms: number, signal: AbortSignal): Promise<void> {
    if (this.#pending || signal.aborted) {
      this.#pending = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.#resolve = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.#resolve = done;
    });
    this.#pending = false;
  }
}
