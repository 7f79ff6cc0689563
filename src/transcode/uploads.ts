import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { InternalError, isMediaplaneError, type MediaplaneError } from '../lib/errors.ts';
import type { ObjectStore } from '../storage/index.ts';
import { parseMediaPlaylist } from './playlist.ts';

/** Content types by extension (RFC 8216 section 4; video/iso.segment is IANA's for .m4s). */
const CONTENT_TYPES: Record<string, string> = {
  '.m3u8': 'application/vnd.apple.mpegurl',
  '.ts': 'video/mp2t',
  '.m4s': 'video/iso.segment',
  '.mp4': 'video/mp4',
  '.m4a': 'audio/mp4',
  '.mpd': 'application/dash+xml',
  '.vtt': 'text/vtt',
  '.jpg': 'image/jpeg',
};

export function contentType(file: string): string {
  return CONTENT_TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
}

/** Joins an output path ("/out/hls") and a relative name into a storage key ("out/hls/x"). */
export function storageKey(prefix: string, rel: string): string {
  const p = prefix.replace(/^\/+|\/+$/g, '');
  return p ? `${p}/${rel}` : rel;
}

/**
 * Uploads with at most `concurrency` puts at once. The first failure is kept and reported
 * through `onError` at once (so the encode can be stopped: no point encoding for a bucket
 * that refuses us); `drain()` waits for the rest and throws it.
 */
export class UploadQueue {
  error: MediaplaneError | undefined;
  readonly #store: ObjectStore;
  readonly #signal: AbortSignal;
  readonly #onError: (err: MediaplaneError) => void;
  #free: number;
  readonly #waiters: (() => void)[] = [];
  readonly #pending = new Set<Promise<void>>();
  readonly #undo: (() => Promise<void>)[] = [];
  /** Bytes uploaded per key, for the per-rendition sizes of the output. */
  readonly sizes = new Map<string, number>();

  constructor(opts: {
    store: ObjectStore;
    signal: AbortSignal;
    concurrency: number;
    onError(err: MediaplaneError): void;
  }) {
    this.#store = opts.store;
    this.#signal = opts.signal;
    this.#free = opts.concurrency;
    this.#onError = opts.onError;
  }

  add(key: string, file: string): void {
    const p = this.#put(key, file).catch((err: unknown) => this.fail(err));
    this.#pending.add(p);
    void p.finally(() => this.#pending.delete(p));
  }

  /** Records an upload's failure (the first one counts) and reports it. */
  fail(err: unknown): void {
    if (this.error) return;
    this.error = isMediaplaneError(err)
      ? err
      : new InternalError(`an upload failed: ${(err as Error).message}`, { cause: err });
    this.#onError(this.error);
  }

  /** Work to undo if the job fails, such as a multipart upload left half-done. */
  whenAbandoned(undo: () => Promise<void>): void {
    this.#undo.push(undo);
  }

  /** The job failed: undoes what `whenAbandoned` registered; never throws. */
  async abandon(): Promise<void> {
    await Promise.all(this.#undo.map((undo) => undo().catch(() => undefined)));
  }

  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
    if (this.error) throw this.error;
  }

  async #put(key: string, file: string): Promise<void> {
    if (this.#free === 0) await new Promise<void>((resolve) => this.#waiters.push(resolve));
    this.#free--;
    try {
      if (this.error || this.#signal.aborted) return;
      const { size } = await stat(file);
      await this.#store.put(key, { file, size }, { contentType: contentType(file), signal: this.#signal });
      this.sizes.set(key, size);
    } finally {
      this.#free++;
      this.#waiters.shift()?.();
    }
  }
}

/**
 * Watches media playlists while ffmpeg writes them and queues each segment once it is
 * listed: the HLS muxer (hls_flags=temp_file) renames a segment into place and only then
 * rewrites the playlist, so a listed segment is complete. Segments therefore go up while
 * the encode runs instead of all at the end (issue 3, item 6).
 */
export class SegmentWatcher {
  readonly #queue: UploadQueue;
  readonly #playlists: { local: string; keyDir: string }[];
  readonly #seen = new Set<string>();
  readonly #announced = new Set<string>();
  /** Each playlist's size and mtime when it was last read. */
  readonly #stamps = new Map<string, { size: number; mtimeMs: number }>();
  readonly #onFirst: ((dir: string, sample: string) => void) | undefined;
  /** Seconds of media in each playlist's finished segments. */
  readonly #written = new Map<string, number>();

  /** `onFirst` hears of each playlist's first file (its init segment, else its first segment). */
  constructor(
    queue: UploadQueue,
    playlists: { local: string; keyDir: string }[],
    onFirst?: (dir: string, sample: string) => void,
  ) {
    this.#queue = queue;
    this.#playlists = playlists;
    this.#onFirst = onFirst;
  }

  /**
   * The seconds every playlist has finished segments for: how far the encode is, when ffmpeg's
   * own -progress is silent (ffmpeg 5 prints no report before every output has its first
   * frame, and the storyboard's first sheet comes at the end).
   */
  get encodedSecs(): number {
    if (this.#playlists.length === 0) return 0;
    return Math.min(...this.#playlists.map((pl) => this.#written.get(pl.local) ?? 0));
  }

  async scan(): Promise<void> {
    for (const pl of this.#playlists) {
      let text: string;
      try {
        // Issue #30: a playlist changes once a segment (seconds), the scan runs every second;
        // one stat instead of open, read, close and a parse of the whole list (the scan was
        // the service's largest own item in a CPU profile of a task, after spawning ffmpeg).
        // ffmpeg only appends to a playlist, so an unchanged size is an unchanged list.
        const { size, mtimeMs } = await stat(pl.local);
        const seen = this.#stamps.get(pl.local);
        if (seen && seen.size === size && seen.mtimeMs === mtimeMs) continue;
        text = await readFile(pl.local, 'utf8');
        this.#stamps.set(pl.local, { size, mtimeMs });
      } catch {
        continue; // not written yet
      }
      const playlist = parseMediaPlaylist(text);
      const first = playlist.map ?? playlist.segments[0]?.uri;
      const dir = path.dirname(pl.local);
      if (first && !this.#announced.has(dir)) {
        this.#announced.add(dir);
        this.#onFirst?.(dir, path.join(dir, first));
      }
      this.#written.set(
        pl.local,
        playlist.segments.reduce((sum, seg) => sum + seg.duration, 0),
      );
      for (const seg of playlist.segments) {
        const key = `${pl.keyDir}/${seg.uri}`;
        if (this.#seen.has(key)) continue;
        this.#seen.add(key);
        this.#queue.add(key, path.join(path.dirname(pl.local), seg.uri));
      }
    }
  }
}
