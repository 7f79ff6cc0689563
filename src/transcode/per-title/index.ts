import type { MediaInfo } from '../probe.ts';
import type { Rendition } from '../renditions.ts';

// Issue #31: the per-title ladder. A stub until its mechanism lands: the renditions as planned.

export interface LadderChoice {
  /** A path or URL ffmpeg can read. */
  input: string;
  media: MediaInfo;
  duration: number;
  renditions: Rendition[];
  ffmpegPath: string;
  signal: AbortSignal;
  progress?(fraction: number): void;
}

/** The renditions with their rate control chosen for this title. */
export async function chooseLadder(o: LadderChoice): Promise<Rendition[]> {
  return o.renditions;
}
