import type { Part, RenditionTap, Segment } from './types.ts';

// The taps of one rendition: each is told every run's init, every part and the end, in order.
// A tap runs inside the packager's pipe handler: one that throws is dropped (and the error
// kept for whoever added it to read), so the ladder and the viewers never see its failure.

export class RenditionTaps {
  readonly #taps = new Set<RenditionTap>();
  readonly #onError: (err: unknown) => void;

  constructor(onError: (err: unknown) => void = () => {}) {
    this.#onError = onError;
  }

  /** Adds a tap; the function returned removes it. */
  add(tap: RenditionTap): () => void {
    this.#taps.add(tap);
    return () => {
      this.#taps.delete(tap);
    };
  }

  init(run: number, bytes: Buffer): void {
    this.#each((t) => t.init(run, bytes));
  }

  /** `part`, just added to `segment` of run `run` (whose duration does not count it yet). */
  part(run: number, segment: Segment, part: Part): void {
    if (this.#taps.size === 0) return;
    const p = {
      run,
      msn: segment.msn,
      part: segment.parts.length - 1,
      bytes: part.bytes,
      durationSecs: part.duration,
      independent: part.independent,
      // Dated as the playlist dates it: the segment's EXT-X-PROGRAM-DATE-TIME plus the parts before.
      wallStartMs: segment.programDateTime + Math.round(segment.duration * 1000),
    };
    this.#each((t) => t.part(p));
  }

  end(): void {
    this.#each((t) => t.end());
    this.#taps.clear();
  }

  #each(call: (t: RenditionTap) => void): void {
    for (const t of this.#taps) {
      try {
        call(t);
      } catch (err) {
        this.#taps.delete(t);
        this.#onError(err);
      }
    }
  }
}
