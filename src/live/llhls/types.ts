// What a LiveRendition is told (its timing) and what it answers (stats, playlist answers).

export interface LlhlsTiming {
  partTargetSecs: number;
  segmentTargetSecs: number;
  windowSecs: number;
}

export interface RenditionStats {
  /** Complete segments so far (the whole session), their media seconds and bytes. */
  segments: number;
  segmentsSecs: number;
  bytes: number;
  /** Media time of the newest part's end. */
  mediaSecs: number;
  /** Wall ms of the newest part. */
  lastPartAt?: number;
  /** The longest complete segment (the source passthrough's keyframe check). */
  maxSegmentSecs: number;
  /** From the init segment: avc1.PPCCLL,mp4a.40.2. */
  codecs?: string;
  width?: number;
  height?: number;
  /** Requests held right now (blocking playlist reloads and hinted parts). */
  blocked: number;
  /** Times the held requests were woken (at most one per part, restart or end). */
  wakeUps: number;
}

export type PlaylistAnswer = { status: 200; body: string } | { status: 400 | 404 | 503; reason: string };
