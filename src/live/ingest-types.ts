import type { Writable } from 'node:stream';

// What the ingest listeners (rtmp/, srt/) and the live runtime (node.ts) say to each other.
// A listener knows the wire protocol and nothing of streams, keys or ffmpeg; the runtime
// decides who may publish and what happens to the media. Both paths end in the same place:
// FLV bytes for one ffmpeg ladder per session.

export type IngestProtocol = 'rtmp' | 'srt';

/** A publisher asking to go live, before any of its media is read. */
export interface PublishAttempt {
  protocol: IngestProtocol;
  /** A secret: never logged, never in an error message. */
  streamKey: string;
  /** The publisher's address, `ip:port`, for logs. */
  remote: string;
  /** Cuts this publisher off (terminate, suspend, a ladder that died); the listener then calls `ended`. */
  disconnect(reason: string): void;
}

/** Why a publish is refused: RTMP sends it as an onStatus error (OBS shows the description), SRT as a rejection. */
export interface PublishRefusal {
  accepted: false;
  /** `BadName`: no such key, or its stream is suspended; `Rejected`: the stream or the node cannot take it now. */
  code: 'BadName' | 'Rejected';
  /** Words for the person at the encoder; never the key. */
  description: string;
}

/**
 * What a source's FLV says of it (onMetaData, the AVC/AAC sequence headers): read by the
 * runtime from the FLV bytes, so RTMP and SRT publishers are described alike.
 */
export interface SourceInfo {
  /** `h264`, `hevc`, `av1`, `vp9`, ... as far as the tags say; undefined before the first video tag. */
  videoCodec?: string;
  audioCodec?: string;
  width?: number;
  height?: number;
  fps?: number;
  /** Declared by the encoder (videodatarate + audiodatarate), kb/s. */
  declaredKbps?: number;
  /** The encoder's own name (`encoder` in onMetaData), for logs. */
  encoder?: string;
}

/**
 * Where an accepted publisher's media goes: FLV bytes (the 13-byte header, then tags in order).
 * The listener writes `flv` with backpressure (it stops reading the publisher while `write`
 * returns false, until 'drain').
 */
export interface FlvSink {
  flv: Writable;
  /**
   * The publisher is gone: it left (`left`), it was cut off (`cut`: `disconnect`, an idle
   * timeout, a flood), or it sent what we cannot read (`refused`: e.g. HEVC over enhanced RTMP;
   * the listener has sent the onStatus error with `reason`). Called once.
   */
  ended(kind: 'left' | 'cut' | 'refused', reason: string): void;
}

export interface PublishAcceptance {
  accepted: true;
  sink: FlvSink;
}

export type PublishDecision = PublishAcceptance | PublishRefusal;

/** The runtime's answer to a listener: checks the key, admits the stream, opens its sink. */
export type PublishGate = (attempt: PublishAttempt) => Promise<PublishDecision>;

/** A listening ingest (RTMP server or SRT relay). */
export interface IngestListener {
  protocol: IngestProtocol;
  /** The port it listens on (the setting's, or the one picked). */
  port: number;
  /** Stops listening and cuts every publisher off. */
  close(): Promise<void>;
}
