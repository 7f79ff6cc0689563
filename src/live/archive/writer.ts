import { Readable } from 'node:stream';
import type { Logger } from '../../lib/log.ts';
import type { BuiltinStore } from '../../storage/builtin/index.ts';
import type { ObjectStore } from '../../storage/index.ts';
import type { TappedPart } from '../session-plugins.ts';
import type { ArchiveIndex } from './archive-index.ts';
import { archiveInitKey, archivePartKey } from './keys.ts';

// Writes one session's tapped parts to the built-in store on this node. The tap is fed from
// the packager's pipe handler, so nothing here may block it: parts are queued and written a
// few at a time; past `maxQueuedBytes` (a store that cannot keep up) parts are dropped up to
// the next keyframe, so what is archived stays decodable, and the drop is logged. A run's
// init segment is written before any part after it starts, so the index never names a part
// whose init is missing.

/** Bytes queued for the store before parts are dropped (a few minutes of a 4K source). */
export const DEFAULT_MAX_QUEUED_BYTES = 64 * 1024 * 1024;
/** Writes in flight at once: a bucket's latency, not its bandwidth, bounds one at a time. */
const CONCURRENCY = 4;
/** Tries of one object before it is given up (the S3 client retries each request too). */
const ATTEMPTS = 3;

type Item = { kind: 'init'; run: number; bytes: Buffer } | { kind: 'part'; part: TappedPart };

export interface ArchiveWriterOptions {
  store: BuiltinStore;
  index: ArchiveIndex;
  sessionId: string;
  log: Logger;
  maxQueuedBytes?: number;
  /** Told once per run of drops (the session's `issues`: its owner sees that the archive has holes). */
  onDrop?: (() => void) | undefined;
}

/** What a writer did, for logs and tests. */
export interface ArchiveWriterStats {
  written: number;
  dropped: number;
  failed: number;
  queuedBytes: number;
}

export class ArchiveWriter {
  readonly #o: ArchiveWriterOptions;
  readonly #out: ObjectStore;
  readonly #queue: Item[] = [];
  readonly #abort = new AbortController();
  readonly #idle: (() => void)[] = [];
  #inFlight = 0;
  /** An init being written: nothing after it starts until it is stored. */
  #barrier = false;
  /** Dropping until the next independent part. */
  #dropping = false;
  #stats: ArchiveWriterStats = { written: 0, dropped: 0, failed: 0, queuedBytes: 0 };

  constructor(o: ArchiveWriterOptions) {
    this.#o = o;
    this.#out = o.store.writer('');
  }

  get stats(): ArchiveWriterStats {
    return { ...this.#stats };
  }

  init(run: number, bytes: Buffer): void {
    // A new run starts with its own keyframe: what was dropped of the last one stays dropped.
    this.#dropping = false;
    this.#enqueue({ kind: 'init', run, bytes: Buffer.from(bytes) });
  }

  part(p: TappedPart): void {
    if (this.#dropping && !p.independent) {
      this.#stats.dropped++;
      return;
    }
    const max = this.#o.maxQueuedBytes ?? DEFAULT_MAX_QUEUED_BYTES;
    if (this.#stats.queuedBytes + p.bytes.length > max) {
      if (!this.#dropping) {
        this.#o.log.warn(
          { session: this.#o.sessionId, queuedBytes: this.#stats.queuedBytes },
          'live archive: the store is not keeping up; parts are dropped until the next keyframe',
        );
        this.#o.onDrop?.();
      }
      this.#dropping = true;
      this.#stats.dropped++;
      return;
    }
    this.#dropping = false;
    // The packager keeps its buffer for viewers: a copy is queued, never the same memory changed later.
    this.#enqueue({ kind: 'part', part: { ...p, bytes: Buffer.from(p.bytes) } });
  }

  /** Resolves once everything queued is written (or given up). */
  drained(): Promise<void> {
    if (this.#queue.length === 0 && this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Writes what is queued, then frees the store's client. */
  async close(): Promise<void> {
    await this.drained();
    await this.#out.close(this.#abort.signal).catch(() => undefined);
  }

  /** Stops at once: what is queued is not written. */
  async discard(): Promise<void> {
    this.#abort.abort();
    this.#queue.length = 0;
    this.#stats.queuedBytes = 0;
    await this.#out.discard();
  }

  #enqueue(item: Item): void {
    if (this.#abort.signal.aborted) return;
    this.#queue.push(item);
    this.#stats.queuedBytes += sizeOf(item);
    this.#pump();
  }

  #pump(): void {
    while (!this.#barrier && this.#inFlight < CONCURRENCY && this.#queue.length > 0) {
      const item = this.#queue.shift() as Item;
      // An init waits for the parts before it (a previous run's) and holds back those after it.
      if (item.kind === 'init' && this.#inFlight > 0) {
        this.#queue.unshift(item);
        return;
      }
      if (item.kind === 'init') this.#barrier = true;
      this.#inFlight++;
      void this.#write(item).finally(() => {
        this.#inFlight--;
        this.#stats.queuedBytes -= sizeOf(item);
        if (item.kind === 'init') this.#barrier = false;
        this.#pump();
        if (this.#queue.length === 0 && this.#inFlight === 0) for (const f of this.#idle.splice(0)) f();
      });
    }
  }

  async #write(item: Item): Promise<void> {
    const id = this.#o.sessionId;
    const key = item.kind === 'init' ? archiveInitKey(id, item.run) : archivePartKey(id, item.part);
    const bytes = item.kind === 'init' ? item.bytes : item.part.bytes;
    for (let attempt = 1; attempt <= ATTEMPTS && !this.#abort.signal.aborted; attempt++) {
      try {
        await this.#out.put(
          key,
          { stream: Readable.from([bytes]), size: bytes.length },
          {
            contentType: 'video/mp4',
            signal: this.#abort.signal,
          },
        );
        if (item.kind === 'part') await this.#o.index.add(id, indexRow(key, item.part));
        this.#stats.written++;
        return;
      } catch (err) {
        if (attempt === ATTEMPTS || this.#abort.signal.aborted) {
          this.#stats.failed++;
          this.#o.log.error({ err, session: id, key }, 'live archive: a write failed; the part is left out');
          return;
        }
        await new Promise((r) => setTimeout(r, 200 * attempt));
      }
    }
  }
}

const sizeOf = (item: Item): number => (item.kind === 'init' ? item.bytes.length : item.part.bytes.length);

function indexRow(key: string, p: TappedPart) {
  return {
    run: p.run,
    msn: p.msn,
    part: p.part,
    key,
    wallStartMs: Math.round(p.wallStartMs),
    durationMs: p.durationSecs * 1000,
    bytes: p.bytes.length,
    independent: p.independent,
  };
}
