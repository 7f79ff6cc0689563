import type { SourceInfo } from './ingest-types.ts';
import type { Profile } from './profiles.ts';

// Whether this node can take another live ladder: a ladder runs in real time or not at all,
// so a publish is admitted only when the CPU its ladder needs is free, and refused before any
// process starts, with the reason for the person at the encoder.
//
// The cost model, in CPU cores, from what the ladder's ffmpeg does per second of media: decode
// the source once, then scale and encode each rung with x264 veryfast/zerolatency; both go with
// pixels per second (width x height x fps). Measured on this project's 2-core host (loaded by
// six other engineers' work at the time), the command of ladder.ts fed a 720p30 camera clip
// (samples/13_butterfly, 7 s, H.264+AAC remuxed to FLV) on stdin, outputs to /dev/null; CPU
// seconds (user + sys) per second of media, three runs:
//   decode of the 720p30 source alone      0.148 0.157 0.202   -> 6e-9 core per decoded pixel/s
//   one rung 426x240@30, beyond the decode 0.095 0.088 0.114
//   one rung 640x360@30                    0.150 0.173 0.233
//   one rung 854x480@30                    0.323 0.290 0.381
//   one rung 1280x720@30                   0.733 0.654 0.700
//   the default 4 rungs of a 720p30 source 1.413 1.595 1.489   (the model below: 1.51)
//   the source passthrough alone (a copy)  0.012 0.013 0.018
// A rung: 2.6e-8 core per encoded pixel/s plus 0.02 (its scaler, muxer and audio). So one
// 720p30 source with the default ladder takes about 1.5 cores: a 2-core node carries one.

const ENCODE_CORES_PER_PIXEL_SEC = 2.6e-8;
const RUNG_FIXED_CORES = 0.02;
const DECODE_CORES_PER_PIXEL_SEC = 6e-9;
/** The frame rate assumed for a rung or a source that names none: a live camera's. */
const ASSUMED_FPS = 30;

/**
 * Cores the ladder of `rungs` needs. Before the source is known (the gate decides before any
 * media is read) it is taken to be as large as the largest rung.
 */
export function ladderCores(rungs: readonly Profile[], source: SourceInfo = {}): number {
  const top = rungs.reduce((a, r) => (r.width * r.height > a.width * a.height ? r : a), { width: 0, height: 0 });
  const sourceFps = source.fps ?? ASSUMED_FPS;
  const sourcePixels = (source.width ?? top.width) * (source.height ?? (top.height || 720));
  const decode = DECODE_CORES_PER_PIXEL_SEC * (sourcePixels || 1280 * 720) * sourceFps;
  const encode = rungs.reduce((sum, r) => {
    const fps = r.fps > 0 ? r.fps / (r.fpsDen ?? 1) : sourceFps;
    return sum + RUNG_FIXED_CORES + ENCODE_CORES_PER_PIXEL_SEC * r.width * r.height * fps;
  }, 0);
  return round2(decode + encode);
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

export type AdmissionAnswer = { admitted: true } | { admitted: false; reason: string };

/** The ladders live on this node and what they cost; one per session id. */
export class LiveAdmission {
  private readonly capacity: number;
  private readonly maxStreams: number;
  private readonly ladders = new Map<string, number>();

  /** capacity: cores live ladders may use; maxStreams: MEDIAPLANE_LIVE_MAX_STREAMS. */
  constructor(o: { capacity: number; maxStreams: number }) {
    this.capacity = o.capacity;
    this.maxStreams = o.maxStreams;
  }

  get streams(): number {
    return this.ladders.size;
  }

  /** Cores the admitted ladders take. */
  get used(): number {
    return round2([...this.ladders.values()].reduce((a, b) => a + b, 0));
  }

  /** Admits a ladder of `cores` under `id`, or says why not (words for the publisher; no key). */
  admit(id: string, cores: number): AdmissionAnswer {
    const live = this.streams;
    if (live >= this.maxStreams)
      return {
        admitted: false,
        reason: `this node takes at most ${this.maxStreams} live streams at once and ${live} are live: try again later`,
      };
    // A ladder bigger than the whole node still runs alone (it falls behind and drops its top rung).
    if (live > 0 && this.used + cores > this.capacity)
      return {
        admitted: false,
        reason: `this node has no CPU left for another ladder: ${live} streams live, their ladders take ${this.used} of ${this.capacity} cores and this one needs ${cores}; try again later or publish with fewer renditions`,
      };
    this.ladders.set(id, cores);
    return { admitted: true };
  }

  /** The ladder's cost once its source is known, or after it dropped a rung. */
  update(id: string, cores: number): void {
    if (this.ladders.has(id)) this.ladders.set(id, cores);
  }

  release(id: string): void {
    this.ladders.delete(id);
  }
}
