import { everyWithoutOverlap, type Repeating } from '../lib/every.ts';
import type { Logger } from '../lib/log.ts';
import type { LiveSessionStore } from './session-store.ts';
import type { RecordingQueue } from './types.ts';

// The sweep every node with ingest runs (every ~2 s): sessions whose holder died (its lease
// gone) and whose publisher was not seen within the reconnect window are ended, their streams
// idle, and the rows of nodes long dead deleted; then each ended session with `record` whose recording was not queued yet is handed
// to the RecordingQueue (idempotent: the asset's id is the session's, so two nodes sweeping
// at once make one recording).

export const SWEEP_EVERY_MS = 2000;

export class SessionSweep {
  readonly #store: Pick<LiveSessionStore, 'endOrphans' | 'unqueuedRecordings' | 'recordingQueued'>;
  readonly #recordings: RecordingQueue | undefined;
  readonly #nodes: { forgetDead(): Promise<number> } | undefined;
  readonly #windowSecs: number;
  readonly #log: Logger;
  readonly #also: (() => Promise<void>)[] = [];
  #repeating: Repeating | undefined;

  constructor(o: {
    store: Pick<LiveSessionStore, 'endOrphans' | 'unqueuedRecordings' | 'recordingQueued'>;
    recordings?: RecordingQueue | undefined;
    /** The registry of nodes (NodeRegistry): the rows of nodes long dead are deleted. */
    nodes?: { forgetDead(): Promise<number> } | undefined;
    windowSecs: number;
    log: Logger;
  }) {
    this.#store = o.store;
    this.#recordings = o.recordings;
    this.#nodes = o.nodes;
    this.#windowSecs = o.windowSecs;
    this.#log = o.log;
  }

  /** Another job for each pass (the node's: its copies of sessions continued elsewhere). */
  alsoEachPass(job: () => Promise<void>): void {
    this.#also.push(job);
  }

  start(everyMs = SWEEP_EVERY_MS): void {
    this.#repeating = everyWithoutOverlap(everyMs, () => this.sweep());
  }

  async stop(): Promise<void> {
    await this.#repeating?.stop();
    this.#repeating = undefined;
  }

  /** One pass: orphans ended, then recordings queued. Never throws (the next pass tries again). */
  async sweep(): Promise<void> {
    try {
      const ended = await this.#store.endOrphans(this.#windowSecs);
      for (const s of ended)
        this.#log.info({ streamId: s.streamId, sessionId: s.id }, 'a session whose node stopped was ended');
      await this.#nodes?.forgetDead();
      for (const job of this.#also) await job();
      if (!this.#recordings) return;
      for (const s of await this.#store.unqueuedRecordings()) {
        await this.#recordings.queue(s);
        await this.#store.recordingQueued(s.id);
        this.#log.info({ streamId: s.streamId, sessionId: s.id }, 'recording queued');
      }
    } catch (err) {
      this.#log.error({ err }, 'the live session sweep failed');
    }
  }
}
