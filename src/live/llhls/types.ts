// What a LiveRendition is told (its timing), what it answers (stats, playlist answers), and
// what it holds (runs, segments, parts: not exported from the folder).

import type { InitInfo } from './fmp4.ts';
import type { PlaylistSegment } from './playlist.ts';

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
  /** Why the last run's bytes stopped being read (not fragmented MP4); kept after a restart. */
  unreadable?: string;
}

export type PlaylistAnswer = { status: 200; body: string } | { status: 400 | 404 | 503; reason: string };

/** One part: a moof+mdat as ffmpeg wrote it. */
export interface Part {
  bytes: Buffer;
  duration: number;
  independent: boolean;
}

export interface Segment extends PlaylistSegment {
  parts: Part[];
  bytes: number;
  /** The segment's file, joined on its first request. */
  whole?: Buffer;
}

export interface Run {
  number: number;
  init?: { bytes: Buffer; info: InitInfo };
  /** ftyp (and anything before moov) waiting for its moov. */
  initBoxes: Buffer[];
  /** The moof waiting for its mdat. */
  moof?: Buffer | undefined;
  /** Media time of the run's first part, and the media time it maps to (time continues across runs). */
  firstTime?: number;
  offset: number;
  /** The rendition's first run keeps ffmpeg's own clock. */
  first: boolean;
  /** Why this run's bytes are no longer read. */
  unreadable?: string;
}

// What a rendition tells its taps (the session's plug-ins: the archive, restreaming), as it
// packages it: fed from the pipe handler, so a tap copies what it needs and returns.

/** One LL-HLS part of a rendition (a moof+mdat), as the packager cut it. */
export interface TappedPart {
  /** The run (one ffmpeg process) it belongs to: its init segment came through `init` first. */
  run: number;
  msn: number;
  /** Its index in segment `msn`. */
  part: number;
  bytes: Buffer;
  durationSecs: number;
  /** Starts with a keyframe (a part that starts a segment always does). */
  independent: boolean;
  /** Wall clock (ms) of its first sample, as EXT-X-PROGRAM-DATE-TIME dates it. */
  wallStartMs: number;
}

/** What a tap is told of one rendition, in order. */
export interface RenditionTap {
  /** A run begins (the ladder's start, a restart, a reconnect): its init segment; its parts follow. */
  init(run: number, bytes: Buffer): void;
  part(p: TappedPart): void;
  /** The rendition ended (EXT-X-ENDLIST): nothing more comes. */
  end(): void;
}
