import { defineSettings } from './types.ts';

// Settings of live streams (spec/API.md section D): where publishers connect, how the
// low-latency HLS ladder is cut, and how many streams a node takes.
export const liveSettings = defineSettings({
  rtmpPort: {
    env: 'MEDIAPLANE_RTMP_PORT',
    type: 'int',
    group: 'live',
    default: 1935,
    min: 0,
    max: 65535,
    description:
      'TCP port of RTMP ingest (rtmp://HOST:PORT/live/STREAM_KEY) in `start` and `ingest`; 0 turns RTMP ingest off.',
  },
  srtPort: {
    env: 'MEDIAPLANE_SRT_PORT',
    type: 'int',
    group: 'live',
    default: 2935,
    min: 0,
    max: 65535,
    description:
      'UDP port of SRT ingest (srt://HOST:PORT?streamid=STREAM_KEY) in `start` and `ingest`; 0 turns SRT ingest off.',
  },
  ingestHost: {
    env: 'MEDIAPLANE_INGEST_HOST',
    type: 'string',
    group: 'live',
    default: undefined,
    defaultText: 'MEDIAPLANE_HOST',
    description: 'Address the RTMP and SRT listeners bind (0.0.0.0 for every interface); the HTTP host when unset.',
  },
  liveMaxStreams: {
    env: 'MEDIAPLANE_LIVE_MAX_STREAMS',
    type: 'int',
    group: 'live',
    default: 16,
    min: 1,
    max: 10_000,
    description: 'Most live streams this node transcodes at once; a publish past it is refused with the reason.',
  },
  liveSegmentSecs: {
    env: 'MEDIAPLANE_LIVE_SEGMENT_SECS',
    type: 'number',
    group: 'live',
    default: 1,
    min: 0.5,
    max: 6,
    description: 'Length of a live HLS segment in seconds: a keyframe starts each one.',
  },
  livePartSecs: {
    env: 'MEDIAPLANE_LIVE_PART_SECS',
    type: 'number',
    group: 'live',
    default: 0.25,
    min: 0.1,
    max: 1,
    description: 'Length of a low-latency HLS part (EXT-X-PART) in seconds.',
  },
  liveWindowSecs: {
    env: 'MEDIAPLANE_LIVE_WINDOW_SECS',
    type: 'number',
    group: 'live',
    default: 30,
    min: 6,
    max: 3600,
    description: 'How much of a live stream its playlists list (and memory keeps), in seconds.',
  },
  liveIdleTimeoutMs: {
    env: 'MEDIAPLANE_LIVE_IDLE_TIMEOUT_MS',
    type: 'int',
    group: 'live',
    default: 10_000,
    min: 500,
    description: 'A publisher that sends nothing for this long (or never finishes its handshake) is cut off.',
  },
  liveCpuCapacity: {
    env: 'MEDIAPLANE_LIVE_CPU_CAPACITY',
    type: 'number',
    group: 'live',
    default: 0,
    min: 0,
    defaultText: 'the CPU cores',
    description:
      'CPU cores live ladders may use on this node; a publish whose ladder would not fit is refused with the reason (0: every core).',
  },
  liveReconnectSecs: {
    env: 'MEDIAPLANE_LIVE_RECONNECT_SECS',
    type: 'int',
    group: 'live',
    default: 60,
    min: 0,
    max: 3600,
    description:
      'A publisher that comes back within this many seconds (to any node) continues the same session and recording; viewers see a discontinuity, not an end (0: every publish is a new session).',
  },
  liveClipSecs: {
    env: 'MEDIAPLANE_LIVE_CLIP_SECS',
    type: 'int',
    group: 'live',
    default: 300,
    min: 0,
    max: 86_400,
    description:
      "How much of a live stream's source is kept in the built-in store for clips (POST /api/clip with the stream's playbackId), in seconds; a recorded session keeps all of it until its recording is made.",
  },
  internalUrl: {
    env: 'MEDIAPLANE_INTERNAL_URL',
    type: 'string',
    group: 'live',
    default: undefined,
    defaultText: 'the address the API listens on',
    description:
      'The URL other nodes reach this one at (http://10.0.0.5:8080), advertised through the database: viewers on any API node are served the ladders live here.',
  },
  clusterSecret: {
    env: 'MEDIAPLANE_CLUSTER_SECRET',
    type: 'string',
    group: 'live',
    default: undefined,
    secret: true,
    description:
      "A secret every node of one service shares (32+ characters): nodes fetch each other's live media with it. Unset: each node serves only the ladders live on it.",
  },
});
