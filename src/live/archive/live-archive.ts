import { createWriteStream } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Db } from '../../db/index.ts';
import { InputUnreadableError } from '../../lib/errors.ts';
import type { BuiltinStore } from '../../storage/builtin/index.ts';
import { inputArgs } from '../../transcode/media-input.ts';
import { FFMPEG_QUIET, runProcess } from '../../transcode/run.ts';
import { type ArchivedPart, ArchiveIndex } from './archive-index.ts';
import { archiveInitKey } from './keys.ts';

// What a recording or a live clip reads of a session's archived source (assets/types.ts
// RecordingArchive; main.ts hands this to assets/, which may not import live/). Each run's
// init segment and parts, joined, are one fragmented MP4; the runs (a ladder restart, a
// reconnect, a continuation on another node) are then joined in order by ffmpeg's concat
// demuxer without encoding, which also starts the file's clock at zero: an offset into it is
// wall ms minus its run's start, plus where that run starts in the file (`runs`).

/** Parts read from the store at once. */
const READ_CONCURRENCY = 8;
/** A join of copied streams: minutes of media take seconds; the bound only catches a hang. */
const JOIN_TIMEOUT_MS = 10 * 60_000;

export interface ExtractOptions {
  sessionId: string;
  fromMs?: number | undefined;
  toMs?: number | undefined;
  dest: string;
  signal: AbortSignal;
}

export interface LiveArchiveOptions {
  db: Db;
  store: BuiltinStore;
  /** The ffmpeg binary (MEDIAPLANE_FFMPEG_PATH). */
  ffmpegPath: string;
}

export class LiveArchive {
  readonly #o: LiveArchiveOptions;
  readonly #index: ArchiveIndex;

  constructor(o: LiveArchiveOptions) {
    this.#o = o;
    this.#index = new ArchiveIndex(o.db);
  }

  async archivedUntil(sessionId: string): Promise<number | undefined> {
    return this.#index.until(sessionId);
  }

  /**
   * The session's archive (or the parts overlapping [fromMs, toMs], from the keyframe at or
   * before fromMs) as one MP4 at `dest`; undefined when nothing is archived there.
   */
  async extract(
    o: ExtractOptions,
  ): Promise<
    { startWallMs: number; durationSecs: number; runs: { wallStartMs: number; startSecs: number }[] } | undefined
  > {
    const runParts = byRun(selectRange(await this.#index.parts(o.sessionId, o.toMs), o.fromMs));
    const first = runParts.values().next().value?.[0];
    if (first === undefined) return undefined;
    const runFiles: string[] = [];
    // Where each run starts in the joined file: after the runs before it (a reconnect's gap is not in it).
    const runs: { wallStartMs: number; startSecs: number }[] = [];
    let joinedMs = 0;
    try {
      for (const [run, ofRun] of runParts) {
        const file = `${o.dest}.run-${run}.mp4`;
        runFiles.push(file);
        runs.push({ wallStartMs: ofRun[0]?.wallStartMs ?? first.wallStartMs, startSecs: joinedMs / 1000 });
        joinedMs += ofRun.reduce((sum, p) => sum + p.durationMs, 0);
        await this.#writeRun({ sessionId: o.sessionId, run, parts: ofRun, file, signal: o.signal });
      }
      await this.#join(runFiles, o.dest, o.signal);
    } finally {
      await Promise.all(runFiles.map((f) => rm(f, { force: true })));
      await rm(`${o.dest}.runs.txt`, { force: true });
    }
    return { startWallMs: first.wallStartMs, durationSecs: joinedMs / 1000, runs };
  }

  /** One run as a fragmented MP4: its init segment, then its parts in order. */
  async #writeRun(o: {
    sessionId: string;
    run: number;
    parts: ArchivedPart[];
    file: string;
    signal: AbortSignal;
  }): Promise<void> {
    const store = this.#o.store;
    const initKey = archiveInitKey(o.sessionId, o.run);
    if (!(await store.stat(initKey)))
      throw new InputUnreadableError(`the live archive lacks the init segment of run ${o.run}`);
    const keys = [initKey, ...o.parts.map((p) => p.key)];
    async function* chunks(): AsyncGenerator<Buffer> {
      for (let at = 0; at < keys.length; at += READ_CONCURRENCY) {
        const batch = keys.slice(at, at + READ_CONCURRENCY).map((k) => readWhole(store, k, o.signal));
        for (const bytes of await Promise.all(batch)) yield bytes;
      }
    }
    await pipeline(Readable.from(chunks()), createWriteStream(o.file), { signal: o.signal });
  }

  /** The runs joined in order, copied, into a plain MP4 whose clock starts at zero. */
  async #join(files: readonly string[], dest: string, signal: AbortSignal): Promise<void> {
    const list = `${dest}.runs.txt`;
    // The concat demuxer's quoting: a quote closes, so it is written as '\''.
    await writeFile(list, files.map((f) => `file '${path.resolve(f).replace(/'/g, "'\\''")}'\n`).join(''));
    const args = [
      ...FFMPEG_QUIET,
      ...inputArgs(list, 'our-concat'),
      ...['-map', '0', '-c', 'copy', '-f', 'mp4', `file:${dest}`],
    ];
    const r = await runProcess(this.#o.ffmpegPath, args, { signal, timeoutMs: JOIN_TIMEOUT_MS });
    if (r.code !== 0) throw new InputUnreadableError(`joining the live archive's runs failed: ${r.stderrTail.trim()}`);
  }
}

/** From the last keyframe at or before `fromMs` (the first one after it when none is before). */
export function selectRange(parts: readonly ArchivedPart[], fromMs: number | undefined): ArchivedPart[] {
  if (fromMs === undefined) return [...parts];
  let start = -1;
  for (const [i, p] of parts.entries()) {
    if (!p.independent) continue;
    if (p.wallStartMs <= fromMs || start === -1) start = i;
    if (p.wallStartMs > fromMs) break;
  }
  return start === -1 ? [] : parts.slice(start);
}

/**
 * The parts by run, each run from its first keyframe: parts before it (the keyframe's part was
 * left out when the store fell behind) cannot be decoded. A run without one is left out.
 */
function byRun(parts: readonly ArchivedPart[]): Map<number, ArchivedPart[]> {
  const runs = new Map<number, ArchivedPart[]>();
  for (const p of parts) {
    const list = runs.get(p.run);
    if (list !== undefined) list.push(p);
    else if (p.independent) runs.set(p.run, [p]);
  }
  return runs;
}

async function readWhole(store: BuiltinStore, key: string, signal: AbortSignal): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of await store.read(key, undefined, signal)) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}
