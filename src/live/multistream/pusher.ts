import { type Backoff, backoffMs } from '../../lib/backoff.ts';
import type { Logger } from '../../lib/log.ts';
import type { RenditionTap, TappedPart } from '../session-plugins.ts';
import { FeedQueue } from './feed-queue.ts';
import { PushProcess } from './push-process.ts';
import type { AddressAnswer } from './target-address.ts';

// One target of one session: a rendition's tap in, one ffmpeg out (push-process.ts), started
// at the first keyframe after an init and again after each failure, with a backoff of 1, 2, 4
// ... 30 s. The tap never waits: parts queue in a FeedQueue that drops whole GOPs when the
// target falls behind. A new run of the rendition (a ladder restart, a reconnect) is a new
// ffmpeg with the run's init. Events: connected on each connection, error once per outage
// (not on every failed retry), disconnected when the session ends while connected.

export type PusherEvent = 'multistream.connected' | 'multistream.error' | 'multistream.disconnected';
export type PusherState = 'waiting' | 'connecting' | 'connected' | 'retrying' | 'stopped';

export interface TargetPusherOptions {
  ffmpegPath: string;
  videoOnly: boolean;
  /**
   * The url for ffmpeg, asked before each connection (the address guard's answer);
   * undefined: nothing is to be pushed (the target is disabled or gone).
   */
  address(): Promise<AddressAnswer | undefined>;
  /** Has the session's and the target's ids (never the url). */
  log: Logger;
  onEvent(e: PusherEvent, detail?: string): void;
  /** A connection failed or ended unasked (for the metrics; each is retried). */
  onFailure?(): void;
  /** Parts were dropped: the target was behind or away. */
  onDropped?(count: number): void;
  backoff?: Backoff | undefined;
  /** Media queued for a target that is behind or away, before whole GOPs are dropped. */
  maxQueueSecs?: number | undefined;
}

export const PUSH_BACKOFF: Backoff = { baseMs: 1000, maxMs: 30_000, jitter: [0.8, 1] };
/** A connection that held this long was a success: the next failure starts the backoff over. */
const STABLE_MS = 10_000;
const FINISH_GRACE_MS = 2000;

export class TargetPusher implements RenditionTap {
  readonly #o: TargetPusherOptions;
  readonly #queue: FeedQueue;
  #init: Buffer | undefined;
  #proc: PushProcess | undefined;
  #state: PusherState = 'waiting';
  #failures = 0;
  /** An error event went out and no connection since. */
  #outage = false;
  #connectedAt = 0;
  #retry: NodeJS.Timeout | undefined;
  #starting = false;
  #stopping: Promise<void> | undefined;

  constructor(o: TargetPusherOptions) {
    this.#o = o;
    this.#queue = new FeedQueue({ maxSecs: o.maxQueueSecs ?? 4 });
  }

  get state(): PusherState {
    return this.#state;
  }

  /** Parts dropped so far (the target was behind or away). */
  get dropped(): number {
    return this.#queue.dropped;
  }

  // --- RenditionTap: never blocks, never throws

  init(_run: number, bytes: Buffer): void {
    if (this.#state === 'stopped') return;
    this.#init = bytes;
    this.#queue.clear();
    // The running ffmpeg read the previous run's init: this run needs one of its own.
    this.#retire();
  }

  part(p: TappedPart): void {
    if (this.#state === 'stopped') return;
    const before = this.#queue.dropped;
    this.#queue.push(p);
    if (this.#queue.dropped > before) this.#o.onDropped?.(this.#queue.dropped - before);
    if (this.#proc) this.#pump();
    else this.#maybeStart();
  }

  end(): void {
    void this.stop();
  }

  /** Flushes and closes the connection; `multistream.disconnected` when it was connected. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const wasConnected = this.#state === 'connected';
    this.#state = 'stopped';
    clearTimeout(this.#retry);
    this.#queue.clear();
    const proc = this.#proc;
    this.#proc = undefined;
    if (proc) await proc.finish(FINISH_GRACE_MS);
    if (wasConnected) this.#o.onEvent('multistream.disconnected');
  }

  #retire(): void {
    const proc = this.#proc;
    if (!proc) return;
    this.#proc = undefined;
    if (this.#state === 'connected' || this.#state === 'connecting') this.#state = 'waiting';
    void proc.finish(FINISH_GRACE_MS);
  }

  #maybeStart(): void {
    if (this.#state === 'stopped' || this.#proc || this.#starting || this.#retry || !this.#init) return;
    this.#queue.restartAtIndependent();
    if (this.#queue.length === 0) return;
    this.#starting = true;
    this.#o
      .address()
      .then(
        (answer) => this.#connect(answer),
        (err: unknown) => this.#failed(`the target's address could not be checked: ${String(err)}`),
      )
      .finally(() => {
        this.#starting = false;
      });
  }

  #connect(answer: AddressAnswer | undefined): void {
    if (this.#state === 'stopped') return;
    if (answer === undefined) {
      this.#o.log.info('multistream target disabled or deleted: nothing is pushed to it');
      void this.stop();
      return;
    }
    if ('refused' in answer) {
      this.#failed(answer.refused);
      return;
    }
    const init = this.#init;
    if (!init) return;
    this.#state = 'connecting';
    const proc: PushProcess = new PushProcess({
      ffmpegPath: this.#o.ffmpegPath,
      url: answer.url,
      videoOnly: this.#o.videoOnly,
      onConnected: () => this.#connected(proc),
      onExit: ({ lastLine }) => this.#exited(proc, lastLine),
    });
    this.#proc = proc;
    proc.write(init, () => this.#pump());
    this.#pump();
  }

  #connected(proc: PushProcess): void {
    if (proc !== this.#proc) return;
    this.#state = 'connected';
    this.#connectedAt = Date.now();
    this.#outage = false;
    this.#o.log.info('multistream target connected');
    this.#o.onEvent('multistream.connected');
  }

  #exited(proc: PushProcess, lastLine: string): void {
    // A retired or stopped process ended as asked.
    if (proc !== this.#proc) {
      this.#maybeStart();
      return;
    }
    this.#proc = undefined;
    if (this.#state === 'connected' && Date.now() - this.#connectedAt >= STABLE_MS) this.#failures = 0;
    this.#failed(`the push ended: ${lastLine}`);
  }

  #failed(reason: string): void {
    if (this.#state === 'stopped') return;
    this.#state = 'retrying';
    this.#o.onFailure?.();
    const delay = backoffMs(this.#failures++, this.#o.backoff ?? PUSH_BACKOFF);
    this.#o.log.warn({ retryInMs: delay }, `multistream target failed: ${reason}`);
    if (!this.#outage) {
      this.#outage = true;
      this.#o.onEvent('multistream.error', reason);
    }
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.#maybeStart();
    }, delay);
    this.#retry.unref();
  }

  #pump(): void {
    const proc = this.#proc;
    while (proc?.running && !proc.blocked) {
      const p = this.#queue.shift();
      if (!p) return;
      proc.write(p.bytes, () => this.#pump());
    }
  }
}
