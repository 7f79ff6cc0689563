import type { Logger } from '../lib/log.ts';
import type { RenditionTap } from './llhls/index.ts';
import type { StreamRecord } from './types.ts';

export type { RenditionTap, TappedPart } from './llhls/index.ts';

// What a live session offers the things that ride along with it (the source archive for
// recordings and clips, archive/; restreaming, multistream/): each is a plug-in the node
// makes per session, which taps the renditions it wants. A tap is fed from the packager's own
// pipe handler, so it must never block or throw: it copies what it needs and returns.

/** What a plug-in sees of its session. */
export interface SessionView {
  stream: StreamRecord;
  sessionId: string;
  /** A publisher that came back within the reconnect window: the session goes on (maybe on another node). */
  continued: boolean;
  log: Logger;
  /** Adds a lasting issue to the session's `issues` (in its owner's words), e.g. archived parts dropped. */
  issue?(text: string): void;
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
