import type { Db } from '../db/index.ts';
import { TooManyRequestsError } from '../lib/errors.ts';
import { Wakeup } from '../lib/wakeup.ts';
import type { TaskRow } from './model.ts';
import type { Phase } from './types.ts';

// Following one task as it changes (GET /api/task/{id}/events, issue #18). One LISTEN per
// process, whatever the number of streams: the follower listens on its channels once, on the
// first follow, and fans each NOTIFY (payload: a task id) out to the streams of that task.
// A lost NOTIFY (a dropped connection to PostgreSQL) only delays a stream: the task is also
// re-read every `pollMs`.
//
// Bounded (issue #25): the streams of one task share one read of it, per NOTIFY or poll,
// fanned out to them all (SharedRead), so 300 streams on a task cost what one does; and an
// owner may hold only `maxPerOwner` streams open in this process. The count is per process
// on purpose: a stream is a connection to this process, and what it holds (a socket, a place
// in the fan-out) is this process's; a global count would need a row per open stream that a
// killed process leaves behind.

/** Phases after which a task changes no more unless retried: its stream ends there. */
export const FINAL_PHASES: readonly Phase[] = ['completed', 'failed', 'cancelled'];

export interface FollowOptions {
  /** Ends the stream (the client went away, the server stops). */
  signal: AbortSignal;
  /** How often the task is re-read without a NOTIFY (default 2000 ms; the first stream of a task sets it). */
  pollMs?: number | undefined;
}

export interface FollowerOptions {
  /** Streams an owner may have open at once in this process (MEDIAPLANE_MAX_EVENT_STREAMS_PER_OWNER). */
  maxPerOwner?: number | undefined;
}

const DEFAULT_POLL_MS = 2000;
const DEFAULT_MAX_PER_OWNER = 32;

interface Follow extends FollowOptions {
  id: string;
  owner: string;
  /** Reads the task as its owner sees it (another owner's task is not found). */
  read: () => Promise<TaskRow>;
}

/** One read of a task per NOTIFY or poll, for every stream of it (of one owner: reads are owner-scoped). */
class SharedRead {
  readonly id: string;
  readonly owner: string;
  /** The stream wake-ups; the read stops with the last one. */
  readonly streams = new Set<Wakeup>();
  readonly wake = new Wakeup();
  readonly stop = new AbortController();
  latest: TaskRow | undefined;
  failure: { err: unknown } | undefined;

  constructor(f: Follow) {
    this.id = f.id;
    this.owner = f.owner;
  }

  /** Reads on each NOTIFY and every `pollMs`, and wakes every stream, until the task ends or nobody follows. */
  async run(read: () => Promise<TaskRow>, pollMs: number): Promise<void> {
    while (!this.stop.signal.aborted) {
      await this.wake.wait(pollMs, this.stop.signal);
      if (this.stop.signal.aborted) return;
      try {
        this.latest = await read();
      } catch (err) {
        // Every stream fails with it (an error event), as each did with its own read.
        this.failure = { err };
      }
      for (const stream of this.streams) stream.fire();
      if (this.failure || (this.latest && FINAL_PHASES.includes(this.latest.phase))) return;
    }
  }
}

export class TaskFollower {
  readonly #db: Db;
  readonly #channels: readonly string[];
  readonly #maxPerOwner: number;
  /** Shared reads by task id, then owner; an entry is deleted when its read stops. */
  readonly #shared = new Map<string, Map<string, SharedRead>>();
  /** Open streams by owner; an entry is deleted with its last stream. */
  readonly #open = new Map<string, number>();
  #listening: Promise<void> | undefined;

  constructor(db: Db, channels: readonly string[], opts: FollowerOptions = {}) {
    this.#db = db;
    this.#channels = channels;
    this.#maxPerOwner = opts.maxPerOwner ?? DEFAULT_MAX_PER_OWNER;
  }

  /** Streams following a task now (for tests: it drops to 0 once they end). */
  get size(): number {
    let n = 0;
    for (const owners of this.#shared.values()) for (const s of owners.values()) n += s.streams.size;
    return n;
  }

  /**
   * The task `read` returns, now and after each change of phase, progress or update time,
   * until a final phase (yielded, then the generator returns) or until `signal` aborts.
   * Past the owner's limit of open streams it throws TooManyRequestsError, before any read.
   */
  async *follow(o: Follow): AsyncGenerator<TaskRow> {
    this.#admit(o.owner);
    const wake = new Wakeup();
    // Subscribed before the first read, so no change between the read and the LISTEN is lost.
    const shared = this.#join(o, wake);
    try {
      await this.#listen();
      let last = await o.read();
      yield last;
      while (!FINAL_PHASES.includes(last.phase)) {
        await wake.wait(undefined, o.signal);
        if (o.signal.aborted) return;
        if (shared.failure) throw shared.failure.err;
        const now = shared.latest;
        if (now && newer(last, now)) {
          yield now;
          last = now;
        }
      }
    } finally {
      this.#leave(shared, wake);
      this.#release(o.owner);
    }
  }

  #admit(owner: string): void {
    const open = this.#open.get(owner) ?? 0;
    if (open >= this.#maxPerOwner)
      throw new TooManyRequestsError(
        `too many open event streams: an owner may follow at most ${this.#maxPerOwner} tasks at once on one API process (GET /api/task/{id}/events); close one first`,
      );
    this.#open.set(owner, open + 1);
  }

  #release(owner: string): void {
    const open = (this.#open.get(owner) ?? 1) - 1;
    if (open > 0) this.#open.set(owner, open);
    else this.#open.delete(owner);
  }

  /** The task's shared read (started by its first stream), with `wake` among its streams. */
  #join(f: Follow, wake: Wakeup): SharedRead {
    const owners = this.#shared.get(f.id) ?? new Map<string, SharedRead>();
    this.#shared.set(f.id, owners);
    let shared = owners.get(f.owner);
    if (!shared) {
      const started = new SharedRead(f);
      owners.set(f.owner, started);
      void started.run(f.read, f.pollMs ?? DEFAULT_POLL_MS).finally(() => this.#forget(started));
      shared = started;
    }
    shared.streams.add(wake);
    return shared;
  }

  #leave(shared: SharedRead, wake: Wakeup): void {
    shared.streams.delete(wake);
    if (shared.streams.size > 0) return;
    shared.stop.abort();
    this.#forget(shared);
  }

  /** A read that stopped takes no new streams: the next stream of the task starts another. */
  #forget(shared: SharedRead): void {
    const owners = this.#shared.get(shared.id);
    if (owners?.get(shared.owner) !== shared) return;
    owners.delete(shared.owner);
    if (owners.size === 0) this.#shared.delete(shared.id);
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
    for (const shared of this.#shared.get(id)?.values() ?? []) shared.wake.fire();
  }
}

/** A change, and not an older version than the stream has shown (its first read may be newer than a shared one). */
function newer(last: TaskRow, now: TaskRow): boolean {
  return changed(last, now) && new Date(now.updated_at).getTime() >= new Date(last.updated_at).getTime();
}

function changed(a: TaskRow, b: TaskRow): boolean {
  return (
    a.phase !== b.phase ||
    a.progress !== b.progress ||
    new Date(a.updated_at).getTime() !== new Date(b.updated_at).getTime()
  );
}
