import type { Logger } from '../lib/log.ts';
import type { StreamRecord } from './types.ts';

// What a live session offers the things that ride along with it (the source archive for
// recordings and clips, archive/; restreaming, multistream/): each is a plug-in the node
// makes per session, which taps the renditions it wants. A tap is fed from the packager's own
// pipe handler, so it must never block or throw: it copies what it needs and returns.

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

/** What a plug-in sees of its session. */
export interface SessionView {
  stream: StreamRecord;
  sessionId: string;
  /** A publisher that came back within the reconnect window: the session goes on (maybe on another node). */
  continued: boolean;
  log: Logger;
}

/** A plug-in of one session on this node. */
export interface SessionPlugin {
  /** A rendition was made (renditions outlive ladder restarts and reconnects here): tap it or not. */
  rendition?(name: string, tap: (t: RenditionTap) => void): void;
  /** The publisher is gone; the session may go on within the reconnect window. */
  publishEnded?(): void;
  /** The session is over on this node (ended, or continued on another node): stop and flush. */
  end(): Promise<void>;
}

/** Made by the node for each session it opens or continues; undefined: nothing to do for it. */
export type SessionPluginFactory = (s: SessionView) => SessionPlugin | undefined;
