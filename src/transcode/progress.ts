/**
 * Reads ffmpeg's `-progress` output (key=value lines, a block per report ending in
 * `progress=continue|end`) from chunks split anywhere, and reports the encoded time.
 */
export class ProgressParser {
  #rest = '';
  readonly #onTime: (seconds: number) => void;
  readonly #decoder = new TextDecoder();

  constructor(onTime: (seconds: number) => void) {
    this.#onTime = onTime;
  }

  push(chunk: Uint8Array): void {
    const text = this.#rest + this.#decoder.decode(chunk, { stream: true });
    const lines = text.split('\n');
    this.#rest = lines.pop() ?? '';
    for (const line of lines) this.#line(line.trim());
  }

  #line(line: string): void {
    // out_time_us is the encoded position; "N/A" before the first frame.
    if (!line.startsWith('out_time_us=')) return;
    const us = Number(line.slice(12));
    if (Number.isFinite(us) && us >= 0) this.#onTime(us / 1e6);
  }
}

const BIG_STEP = 0.05;

/**
 * Limits progress reports to one per interval and never lets the fraction go down. A step of
 * 5% or more always goes through: the ends of a job's phases (the download, the per-title
 * analysis) come in quick steps, and a client polling the task should see them.
 */
export function throttledProgress(report: (f: number) => void, intervalMs = 1000): (f: number) => void {
  let last = -1;
  let at = 0;
  return (f) => {
    const x = Math.min(1, Math.max(0, f));
    const now = Date.now();
    if (x <= last || (now - at < intervalMs && x < 1 && x - last < BIG_STEP)) return;
    last = x;
    at = now;
    report(x);
  };
}
