// The live domain's own words (spec/API.md section D): a stream is a live source taken in over
// RTMP or SRT, transcoded to a ladder and played as low-latency HLS. What the API, the store
// and the runtime (node.ts) say to each other; wire shapes live in api/contract/stream.ts.

import type { IngestProtocol } from './ingest-types.ts';
import type { Profile } from './profiles.ts';

export type { StreamEventName } from './event-names.ts';

/** Where a stream's media is pushed besides our ladder (stored as given; restreaming comes next). */
export interface MultistreamTarget {
  /** A profile's name, or `source`. */
  profile: string;
  videoOnly?: boolean;
  /** A saved target's id. */
  id?: string;
  /** An inline target; its url is a secret (it holds the other service's key). */
  spec?: { name?: string; url: string };
}

/** What a live session reports of itself while live (every ~2 s), kept on its stream. */
export interface LiveCounters {
  isHealthy: boolean;
  /** Why the stream is unhealthy or degraded, in words for its owner (never a key). */
  issues: string[];
  /** Bytes per second in (the publisher's FLV) and out (every rendition), over the last few seconds. */
  ingestRate: number;
  outgoingRate: number;
  /** Complete segments of the source passthrough and of the transcoded renditions, with their seconds and bytes. */
  sourceSegments: number;
  transcodedSegments: number;
  sourceSegmentsDuration: number;
  transcodedSegmentsDuration: number;
  sourceBytes: number;
  transcodedBytes: number;
}

/** Where a session is: its stream, its id, and the node that holds it. */
export interface SessionKey {
  streamId: string;
  sessionId: string;
  nodeId: string;
}

/** What a live session writes of itself and its stream (LiveSessionStore in session-store.ts has these). */
export interface SessionStore {
  /** The counters of the session and its stream (every ~2 s while live); the publisher was seen now. */
  report(k: SessionKey, counters: LiveCounters): Promise<void>;
  /** The publisher went: the stream idle (`stream.idle`), the session waiting within the window. */
  idle(k: SessionKey): Promise<void>;
  /** Ends the session if this node holds it in a state of `from`; the session as it ended, else undefined. */
  end(k: SessionKey, from?: readonly SessionRecord['state'][]): Promise<SessionRecord | undefined>;
}

/** A stream as the store keeps it (StreamStore in store.ts); the API's wire shape is toWireStream's. */
export interface StreamRecord extends Omit<LiveCounters, 'isHealthy'> {
  id: string;
  owner: string;
  projectId: string;
  /** The API key that made the stream: a publish counts as one request against its rpm. */
  keyId?: string | undefined;
  name: string;
  /** A secret: shown to its owner, never logged, looked up by its hash (StreamStore.findByKey). */
  streamKey: string;
  playbackId: string;
  /** null: the default ladder (profiles.ts DEFAULT_LIVE_PROFILES); []: the source alone. */
  profiles: Profile[] | null;
  record: boolean;
  recordingSpec?: { profiles?: Profile[] | null } | undefined;
  playbackPolicy?: Record<string, unknown> | undefined;
  multistream: { targets: MultistreamTarget[] };
  userTags?: Record<string, unknown> | undefined;
  creatorId?: unknown;
  suspended: boolean;
  isActive: boolean;
  /** null while it has never been live. */
  isHealthy: boolean | null;
  /** The session live now (or last), one per publish. */
  sessionId?: string | undefined;
  protocol?: IngestProtocol | undefined;
  createdAt: Date;
  lastSeen?: Date | undefined;
  lastTerminatedAt?: Date | undefined;
}

/** A live session (one per publish, continued by a publisher back within the reconnect window), as the store keeps it. */
export interface SessionRecord extends Omit<LiveCounters, 'isHealthy'> {
  id: string;
  streamId: string;
  owner: string;
  projectId: string;
  /** The stream's name. */
  name: string;
  /** The stream's. */
  playbackId: string;
  /** The stream's, copied at the session's start. */
  profiles: Profile[] | null;
  record: boolean;
  recordingSpec?: { profiles?: Profile[] | null } | undefined;
  /** `waiting`: the publisher is gone and may come back within the window. */
  state: 'live' | 'waiting' | 'ended';
  /** The node holding it while live or waiting (its lease: live_nodes' heartbeat). */
  nodeId?: string | undefined;
  isHealthy: boolean | null;
  createdAt: Date;
  /** The publisher's last data: the reconnect window counts from it. */
  lastSeen?: Date | undefined;
  endedAt?: Date | undefined;
  /** When its recording was handed to the RecordingQueue. */
  recordingQueuedAt?: Date | undefined;
}

/** Makes the recording of an ended session (main.ts: the assets side). Idempotent: the asset's id is the session's. */
export interface RecordingQueue {
  queue(session: SessionRecord): Promise<void>;
}

/**
 * What the API reads of a live rendition (the LL-HLS engineer's LiveRendition, llhls/index.ts,
 * has this shape): its playlists and files, as a player asks for them.
 */
export interface ServedRendition {
  readonly name: string;
  readonly ready: boolean;
  /** Its rendition reports (EXT-X-RENDITION-REPORT) are the ladder's business, not the caller's. */
  playlist(req: {
    msn?: number;
    part?: number;
    uriQuery?: string;
    signal?: AbortSignal;
  }): Promise<{ status: 200; body: string } | { status: 400 | 404 | 503; reason: string }>;
  /** init-R.mp4, S.m4s, S.P.m4s; a hinted part not yet written is waited for; undefined: 404. */
  file(name: string, signal?: AbortSignal): Promise<Buffer | undefined>;
}

/** The renditions of one live playbackId on this node. */
export interface LiveLadder {
  /** undefined until every listed rendition has its first part (a ladder on another node answers asynchronously). */
  multivariant(uriQuery?: string): string | undefined | Promise<string | undefined>;
  rendition(name: string): ServedRendition | undefined;
  renditions(): readonly ServedRendition[];
}

/** What the API asks of the live runtime (LiveNode in node.ts implements it). */
export interface LivePlayback {
  /** The ladder of a playbackId live on this node; undefined when it is not. */
  ladder(playbackId: string): LiveLadder | undefined;
  /**
   * Ends the stream's session here now, without a reconnect window (terminate, suspend, delete):
   * its publisher cut off; false when no publisher of it is live here (a session waiting here
   * for its publisher is ended all the same).
   */
  terminate(streamId: string, reason: string): boolean;
}
