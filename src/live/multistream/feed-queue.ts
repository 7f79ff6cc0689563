import type { TappedPart } from '../session-plugins.ts';

// The parts waiting for one target's ffmpeg. The rendition's tap pushes every part and never
// waits; a target slower than the stream (or away, between retries) would make this grow
// without end, so past `maxSecs` of media it drops whole GOPs: up to the next independent part
// (a keyframe), the only place a decoder can pick up again. Dropping never slows the stream,
// its viewers or the other targets; the target sees a jump in time.

export class FeedQueue {
  readonly #maxSecs: number;
  #parts: TappedPart[] = [];
  #secs = 0;
  /** Nothing is taken until an independent part comes: what follows a gap must start with a keyframe. */
  #awaitIndependent = true;
  /** Parts dropped so far (too slow, or waiting for a keyframe). */
  dropped = 0;

  constructor(o: { maxSecs: number }) {
    this.#maxSecs = o.maxSecs;
  }

  get length(): number {
    return this.#parts.length;
  }

  /** Seconds of media queued. */
  get secs(): number {
    return this.#secs;
  }

  push(p: TappedPart): void {
    if (this.#awaitIndependent && !p.independent) {
      this.dropped++;
      return;
    }
    this.#awaitIndependent = false;
    this.#parts.push(p);
    this.#secs += p.durationSecs;
    while (this.#secs > this.#maxSecs && this.#parts.length > 0) this.#dropGop();
  }

  shift(): TappedPart | undefined {
    const p = this.#parts.shift();
    if (p !== undefined) this.#secs -= p.durationSecs;
    return p;
  }

  /**
   * A new writer (ffmpeg) takes the queue from here: it starts at the newest independent part
   * queued (a live target wants the present, not the backlog), or at the next one to come.
   */
  restartAtIndependent(): void {
    let at = -1;
    for (let i = this.#parts.length - 1; i >= 0 && at < 0; i--) if (this.#parts[i]?.independent) at = i;
    if (at < 0) {
      this.clear();
      return;
    }
    this.#drop(at);
  }

  /** Drops everything: the next part taken is an independent one (a new run begins with one). */
  clear(): void {
    this.dropped += this.#parts.length;
    this.#parts = [];
    this.#secs = 0;
    this.#awaitIndependent = true;
  }

  /** Drops the head and the rest of its GOP: the queue then starts with an independent part, or waits for one. */
  #dropGop(): void {
    const next = this.#parts.findIndex((p, i) => i > 0 && p.independent);
    if (next < 0) this.clear();
    else this.#drop(next);
  }

  #drop(count: number): void {
    for (const p of this.#parts.splice(0, count)) this.#secs -= p.durationSecs;
    this.dropped += count;
  }
}
