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

/** Limits progress reports to one per interval and never lets the fraction go down. */
export function throttledProgress(report: (f: number) => void, intervalMs = 1000): (f: number) => void {
  let last = -1;
  let at = 0;
  return (f) => {
    const x = Math.min(1, Math.max(0, f));
    const now = Date.now();
    if (x <= last || (now - at < intervalMs && x < 1)) return;
    last = x;
    at = now;
    report(x);
  };
}
