import type { LiveCounters } from './types.ts';

// Whether a live session keeps up, in its owner's words (spec/API.md section D: `isHealthy`,
// `issues`): unhealthy while the ladder is behind real time, or while the publisher sends less
// than its encoder declared. Behind: its newest part's media time lags the publisher's by more
// than two segments beyond the lag it started with, or its output grows slower than the wall
// clock while media waits for it. The second is needed because the publisher is held back
// (backpressure up to the listener's socket): the media waiting is bounded by the buffers, a
// fraction of a second at a high bitrate. A publisher that itself sends slowly leaves nothing
// waiting and is not the ladder's fault. A ladder behind for a few seconds drops its top rung.

/** How long a ladder may stay behind before it drops its top rung. */
const BEHIND_RESTART_MS = 4000;
/** The window over which the ladder's output rate is measured, and the least of it that counts. */
const OUTPUT_WINDOW_MS = 3000;
const OUTPUT_MIN_SPAN_MS = 1500;
/** An output slower than this share of real time, with media waiting, is behind. */
const SLOW_OUTPUT = 0.85;
/** Media waiting for the ladder beyond its usual lag (s): more than a part's noise. */
const WAITING_SECS = 0.3;
/** The ingest rate is measured over a few seconds: no verdict on it before this. */
const RATE_WARMUP_MS = 6000;
/** Under this share of the declared bitrate, the publisher's uplink is taken to be too slow. */
const RATE_SHORTFALL = 0.7;
/** Lasting issues kept (the newest). */
const MAX_EVENTS = 8;

export type HealthVerdict = 'ok' | 'behind' | 'drop-top-rung';

interface Totals {
  segments: number;
  secs: number;
  bytes: number;
}

export class SessionHealth {
  private readonly segmentSecs: number;
  private readonly startedAt: number;
  private readonly events: string[] = [];
  /** The smallest lag seen since the ladder (re)started: the lag of a ladder that keeps up. */
  private baseline: number | undefined;
  private lag = 0;
  private isBehind = false;
  /** The output's media time by wall time, over the last few seconds. */
  private outputs: { at: number; secs: number }[] = [];
  private outputRate = 1;
  private behindSince: number | undefined;
  private lastOut: { at: number; bytes: number } | undefined;
  private outgoingRate = 0;

  constructor(o: { segmentSecs: number; now?: number }) {
    this.segmentSecs = o.segmentSecs;
    this.startedAt = o.now ?? Date.now();
  }

  /** A lasting issue (a refusal, a dropped rung, a ladder that stopped). */
  event(issue: string): void {
    if (this.events.includes(issue)) return;
    this.events.push(issue);
    if (this.events.length > MAX_EVENTS) this.events.shift();
  }

  ladderStarted(): void {
    this.baseline = undefined;
    this.behindSince = undefined;
    this.outputs = [];
    this.outputRate = 1;
    this.isBehind = false;
  }

  get behind(): boolean {
    return this.isBehind;
  }

  /** The output's media seconds per wall second over the window (1 before the window has enough). */
  private rateOf(now: number, secs: number): number {
    this.outputs.push({ at: now, secs });
    while (this.outputs.length > 2 && now - (this.outputs[1]?.at ?? now) >= OUTPUT_WINDOW_MS) this.outputs.shift();
    const first = this.outputs[0];
    if (!first || now - first.at < OUTPUT_MIN_SPAN_MS) return 1;
    return ((secs - first.secs) * 1000) / (now - first.at);
  }

  /**
   * inputSecs: the FLV's newest media time; outputSecs: the slowest rendition's (0 before its
   * first part); blocked: ffmpeg has not taken the last write yet.
   */
  observe(o: { now: number; inputSecs: number; outputSecs: number; blocked: boolean }): HealthVerdict {
    if (!Number.isFinite(o.outputSecs) || o.outputSecs <= 0) return 'ok';
    this.lag = o.inputSecs - o.outputSecs;
    this.baseline = Math.min(this.baseline ?? this.lag, this.lag);
    this.outputRate = this.rateOf(o.now, o.outputSecs);
    const waiting = this.lag - this.baseline;
    this.isBehind =
      waiting > 2 * this.segmentSecs || (this.outputRate < SLOW_OUTPUT && (o.blocked || waiting > WAITING_SECS));
    if (!this.behind) {
      this.behindSince = undefined;
      return 'ok';
    }
    this.behindSince ??= o.now;
    if (o.now - this.behindSince < BEHIND_RESTART_MS) return 'behind';
    this.behindSince = undefined;
    return 'drop-top-rung';
  }

  counters(o: {
    now: number;
    ingestRate: number;
    declaredKbps: number | undefined;
    outBytes: number;
    sourceIssue?: string;
    source: Totals;
    transcoded: Totals;
  }): LiveCounters {
    if (this.lastOut && o.now > this.lastOut.at)
      this.outgoingRate = ((o.outBytes - this.lastOut.bytes) * 1000) / (o.now - this.lastOut.at);
    this.lastOut = { at: o.now, bytes: o.outBytes };
    const issues = [...this.events];
    if (this.behind && this.baseline !== undefined)
      issues.push(
        `the ladder is behind real time (${(this.lag - this.baseline).toFixed(1)} s, at ${this.outputRate.toFixed(2)}x): the node's CPU is short`,
      );
    const declared = (o.declaredKbps ?? 0) * 125;
    const short = declared > 0 && o.now - this.startedAt >= RATE_WARMUP_MS && o.ingestRate < RATE_SHORTFALL * declared;
    if (short)
      issues.push(
        `the publisher sends ${Math.round(o.ingestRate / 125)} kb/s, under the ${Math.round(declared / 125)} kb/s its encoder declared: its upload may be too slow`,
      );
    if (o.sourceIssue) issues.push(o.sourceIssue);
    return {
      isHealthy: !this.behind && !short,
      issues,
      ingestRate: Math.round(o.ingestRate),
      outgoingRate: Math.round(this.outgoingRate),
      sourceSegments: o.source.segments,
      transcodedSegments: o.transcoded.segments,
      sourceSegmentsDuration: round3(o.source.secs),
      transcodedSegmentsDuration: round3(o.transcoded.secs),
      sourceBytes: o.source.bytes,
      transcodedBytes: o.transcoded.bytes,
    };
  }
}

function round3(n: number): number {
  return Math.round(n * 1000) / 1000;
}

/** The longest keyframe interval of a source offered as a rendition: its segments would be longer (docs/live.md asks OBS users for 1-2 s). */
export const SOURCE_MAX_KEYFRAME_GAP_MS = 2000;

export function sourceKeyframeIssue(gapMs: number): string {
  return `the source is not offered as a rendition: its keyframes are ${(gapMs / 1000).toFixed(1)} s apart (at most 2 s); set the encoder's keyframe interval to 1 or 2 s (OBS: Settings > Output > Keyframe Interval)`;
}
