// The model of bench/chunked.ts: what a film of any length would take on W two-core workers,
// from the times one chunked run measured. A model, not a measurement; its assumptions
// (bench/README.md, "Chunked encoding"):
//
// - a worker has two slots, one core each, and a slot runs a piece as fast as the measured
//   run's pinned slots did (the measured seconds of a piece per second of its media, the
//   median over the run's pieces of each kind);
// - the pieces are queued as the service queues them, each audio piece beside the chunk of
//   the same window, and a free slot takes the next one after the measured claim gap;
// - the split (probe and plan) does not grow with the film; the stitch is counted both ways:
//   as measured (what does not grow) and scaled with the film's length (an upper bound: the
//   bytes it copies grow);
// - the source, the store and the database serve every slot at once as they served two.

import { median as medianOf } from './stats.ts';

/** One piece of the measured run, as GET /api/task/{id} showed it. */
export interface SeenPiece {
  label: string;
  /** Seconds from the POST when the bench first saw it running, and completed. */
  ran?: number;
  done?: number;
  worker?: string;
}

export type PieceKind = 'audio' | 'chunk' | 'stitch';

/** The kind of a piece from its label: audio pieces' labels begin with `audio`, chunks' name a `chunk`. */
export function kindOf(label: string): PieceKind | undefined {
  if (/^audio/i.test(label)) return 'audio';
  if (/chunk/i.test(label)) return 'chunk';
  if (/^stitch/i.test(label)) return 'stitch';
  return undefined;
}

/** The media range a label names ("video 30.0-60.0 s (chunk 2 of 6)"); the whole input when it names none. */
export function rangeOf(label: string, seconds: number): { start: number; end: number } {
  const m = /(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?) s/.exec(label);
  return m ? { start: Number(m[1]), end: Number(m[2]) } : { start: 0, end: seconds };
}

export interface Measured {
  /** Input seconds of the measured run. */
  seconds: number;
  /** POST to the first piece running: probe, plan, the pieces queued and the first claimed. */
  split: number;
  /** Slot seconds per second of media (median of the pieces); NaN: none of that kind. */
  audioRate: number;
  chunkRate: number;
  /** Media seconds per piece (the longest of the kind: the last one may be shorter). */
  audioSecs: number;
  chunkSecs: number;
  audioPieces: number;
  chunks: number;
  /** The stitch piece, from its start to the task's completion. */
  stitch: number;
  /** A slot's idle time between one piece's end and its next piece's start (median; 0 if unseen). */
  gap: number;
}

/** The median of the finite samples (a piece seen only running has none). */
const median = (xs: number[]): number => medianOf(xs.filter((x) => Number.isFinite(x)));

/**
 * The model's inputs from a chunked run's pieces: each piece's wall time, or with `cpu` its CPU
 * seconds (chunked-cpu.ts: what a slot with a core of its own would spend; the stitch's
 * waits for the store are then left out).
 */
export function measure(
  pieces: SeenPiece[],
  o: { seconds: number; wall: number; cpu?: ReadonlyMap<string, number> | undefined },
): Measured {
  const of = (kind: PieceKind) => pieces.filter((p) => kindOf(p.label) === kind);
  const took = (p: SeenPiece): number =>
    o.cpu ? (o.cpu.get(p.label) ?? Number.NaN) : (p.done ?? Number.NaN) - (p.ran ?? Number.NaN);
  const rate = (ps: SeenPiece[]): number =>
    median(
      ps.map((p) => {
        const r = rangeOf(p.label, o.seconds);
        return took(p) / (r.end - r.start);
      }),
    );
  const length = (ps: SeenPiece[]): number =>
    Math.max(0, ...ps.map((p) => rangeOf(p.label, o.seconds)).map((r) => r.end - r.start));
  const [audio, chunks] = [of('audio'), of('chunk')];
  const stitch = of('stitch')[0];
  return {
    seconds: o.seconds,
    split: Math.min(...pieces.map((p) => p.ran ?? Number.POSITIVE_INFINITY)),
    audioRate: rate(audio),
    chunkRate: rate(chunks),
    audioSecs: length(audio),
    chunkSecs: length(chunks),
    audioPieces: audio.length,
    chunks: chunks.length,
    stitch: o.cpu ? (o.cpu.get('stitch') ?? Number.NaN) : o.wall - (stitch?.ran ?? Number.NaN),
    gap: slotGap(pieces.filter((p) => kindOf(p.label) !== 'stitch')) || 0,
  };
}

/** Median idle time of a worker between the end of one piece and the start of its next (0.25 s polls: rough). */
function slotGap(pieces: SeenPiece[]): number {
  const gaps: number[] = [];
  const byWorker = Map.groupBy(
    pieces.filter((p) => p.worker && p.ran !== undefined && p.done !== undefined),
    (p) => p.worker ?? '',
  );
  for (const ps of byWorker.values()) {
    const ends = ps.map((p) => p.done ?? 0).sort((a, b) => a - b);
    for (const p of ps) {
      const before = ends.filter((e) => e <= (p.ran ?? 0)).at(-1);
      if (before !== undefined) gaps.push((p.ran ?? 0) - before);
    }
  }
  return median(gaps);
}

interface ModelPiece {
  kind: 'audio' | 'chunk';
  index: number;
  start: number;
  secs: number;
}

/** A film's pieces in queue order: by window, an audio piece before the chunk of the same window. */
function filmPieces(m: Measured, seconds: number): ModelPiece[] {
  const cut = (kind: ModelPiece['kind'], every: number): ModelPiece[] =>
    Array.from({ length: Math.ceil(seconds / every) }, (_, index) => ({
      kind,
      index,
      start: index * every,
      secs: Math.min(every, seconds - index * every),
    }));
  // One audio piece for the whole film when the measured run had one for its whole input.
  const audioEvery = m.audioPieces === 1 && m.audioSecs >= m.seconds - 1 ? seconds : m.audioSecs;
  const audio = Number.isFinite(m.audioRate) && m.audioPieces > 0 ? cut('audio', audioEvery) : [];
  return [...audio, ...cut('chunk', m.chunkSecs)].sort(
    (a, b) => a.start - b.start || (a.kind === 'audio' ? -1 : 1) - (b.kind === 'audio' ? -1 : 1),
  );
}

export interface Modelled {
  wall: number;
  split: number;
  /** From the first piece's claim to the last piece's end. */
  pieces: number;
  stitch: number;
  /** When the first audio piece and the first chunk are done: the first playlists can be published. */
  firstPlayable: number;
  /** Slot seconds of all pieces over the slots: the pieces' time with perfect balance. */
  balanced: number;
  critical: string;
}

/** The film of `seconds` on `slots` slots; `stitch` as measured or scaled with the length. */
export function model(m: Measured, o: { seconds: number; slots: number; stitch: 'measured' | 'scaled' }): Modelled {
  const free = new Array<number>(o.slots).fill(0);
  let last: (ModelPiece & { end: number; took: number }) | undefined;
  let work = 0;
  const firstEnd = { audio: 0, chunk: 0 };
  for (const p of filmPieces(m, o.seconds)) {
    const took = p.secs * (p.kind === 'audio' ? m.audioRate : m.chunkRate);
    const slot = free.indexOf(Math.min(...free));
    const end = (free[slot] ?? 0) + (free[slot] ? m.gap : 0) + took;
    free[slot] = end;
    work += took;
    if (p.index === 0) firstEnd[p.kind] = end;
    if (!last || end > last.end) last = { ...p, end, took };
  }
  const pieces = last?.end ?? 0;
  const stitch = o.stitch === 'scaled' ? (m.stitch * o.seconds) / m.seconds : m.stitch;
  const balanced = work / o.slots;
  const parts = { split: m.split, pieces, stitch };
  const biggest = (Object.keys(parts) as (keyof typeof parts)[]).reduce((a, b) => (parts[a] >= parts[b] ? a : b));
  let critical: string = biggest;
  if (biggest === 'pieces' && last)
    critical =
      last.end - last.took <= m.gap + 1e-9 || last.took >= pieces * 0.8
        ? `one ${last.kind === 'audio' ? 'audio piece' : 'chunk'} (${last.took.toFixed(0)} s: more slots do not shorten it)`
        : `the slots' throughput (${balanced.toFixed(0)} s of pieces per slot with perfect balance)`;
  return {
    wall: m.split + pieces + stitch,
    split: m.split,
    pieces,
    stitch,
    firstPlayable: m.split + Math.max(firstEnd.audio, firstEnd.chunk),
    balanced,
    critical,
  };
}
