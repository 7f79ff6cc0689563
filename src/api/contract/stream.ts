import { type Static, type TSchema, Type } from '@sinclair/typebox';
import {
  DEFAULT_LIVE_PROFILES,
  H264_PROFILES,
  PROFILE_BOUNDS,
  type LiveCounters,
  type Profile,
  type StreamRecord,
  type StreamRow,
  streamFromRow,
} from '../../live/index.ts';
import { mediaUrl, type PublicBase } from '../public-base.ts';
import { type PlaybackInfo, PlaybackPolicy, wireCreator } from './asset.ts';
import { CreatorId } from './transcode.ts';

// The wire contract of live streams (spec/API.md section D) at the API's edge: the bodies of
// POST and PATCH /api/stream and the Stream as the `livepeer` SDK 3.5 parses it (its models
// components/stream.ts, ffmpegprofile.ts, newstreampayload.ts, streampatchpayload.ts:
// zod, strict about types; a profile's `fps` a required integer, `gop` a string). The
// profile bounds are the domain's (live/profiles.ts PROFILE_BOUNDS); the rules a schema
// cannot say (even sizes, unique names) are live/profiles.ts profileProblems.

const B = PROFILE_BOUNDS;
const between = (what: string, b: { min: number; max: number }) =>
  `${what}, ${b.min.toLocaleString('en')} to ${b.max.toLocaleString('en')}`;

export const LiveProfile = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: B.nameMaxLength,
      pattern: B.namePattern,
      description:
        'The rendition\'s name in playlists ({name}/index.m3u8): letters, digits, _ . -; unique; not "source".',
    }),
    width: Type.Integer({ minimum: B.width.min, maximum: B.width.max, description: between('Even pixels', B.width) }),
    height: Type.Integer({
      minimum: B.height.min,
      maximum: B.height.max,
      description: `${between('Even pixels', B.height)}; a rung taller than the source is left out while it is live.`,
    }),
    bitrate: Type.Integer({
      minimum: B.bitrate.min,
      maximum: B.bitrate.max,
      description: between('Bits per second', B.bitrate),
    }),
    fps: Type.Optional(
      Type.Integer({
        minimum: B.fps.min,
        maximum: B.fps.max,
        description: "Frames per second; 0 (the default) keeps the source's rate.",
      }),
    ),
    fpsDen: Type.Optional(Type.Integer({ minimum: B.fpsDen.min, maximum: B.fpsDen.max })),
    gop: Type.Optional(
      Type.String({
        maxLength: 16,
        description:
          'Kept as given ("intra" or seconds, 0.1 to 10); a live ladder starts every segment with a keyframe whatever it says.',
      }),
    ),
    profile: Type.Optional(Type.Union(H264_PROFILES.map((p) => Type.Literal(p)))),
    encoder: Type.Optional(Type.Literal('H.264', { description: 'Live ladders are H.264 (x264).' })),
    quality: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 44, description: 'Kept as given; live rungs encode at their bitrate.' }),
    ),
  },
  { additionalProperties: false },
);
export type LiveProfile = Static<typeof LiveProfile>;

const Profiles = Type.Array(LiveProfile, {
  maxItems: B.maxProfiles,
  description: `The ladder, at most ${B.maxProfiles} rungs; absent or null: the default ladder (240p0, 360p0, 480p0, 720p0); []: the source alone.`,
});

const Target = Type.Object(
  {
    profile: Type.String({ minLength: 1, maxLength: 64, description: 'A profile\'s name, or "source".' }),
    videoOnly: Type.Optional(Type.Boolean()),
    id: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'A saved multistream target.' })),
    spec: Type.Optional(
      Type.Object(
        {
          name: Type.Optional(Type.String({ maxLength: 256 })),
          url: Type.String({
            minLength: 1,
            maxLength: 2048,
            pattern: '^(rtmps?|srt)://',
            description: "rtmp://, rtmps:// or srt://; a secret (it holds the other service's key): never shown back.",
          }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
/** A target of a stream: by a saved target's id, or an inline spec (which becomes a saved target). */
export const StreamTargetBody = Target;
export type StreamTargetBody = Static<typeof Target>;

const Multistream = Type.Object(
  {
    targets: Type.Optional(
      Type.Array(Target, {
        maxItems: 16,
        description:
          'Where each session is restreamed, from its start: a saved target by id, or an inline spec (saved as a target; the stream keeps its id).',
      }),
    ),
  },
  { additionalProperties: false },
);

const UserTags = Type.Record(
  Type.String({ maxLength: 128 }),
  Type.Union([
    Type.String({ maxLength: 1024 }),
    Type.Number(),
    Type.Array(Type.Union([Type.String({ maxLength: 1024 }), Type.Number()]), { maxItems: 100 }),
  ]),
  { maxProperties: 50 },
);

const RecordingSpec = Type.Object(
  { profiles: Type.Optional(Type.Union([Type.Array(LiveProfile, { maxItems: B.maxProfiles }), Type.Null()])) },
  { additionalProperties: false, description: 'Kept with the stream; recordings come with a later version.' },
);

const StreamName = Type.String({ minLength: 1, maxLength: 512 });

const streamOptions = {
  profiles: Type.Optional(Type.Union([Profiles, Type.Null()])),
  record: Type.Optional(Type.Boolean({ description: 'Kept with the stream; recordings come with a later version.' })),
  recordingSpec: Type.Optional(RecordingSpec),
  playbackPolicy: Type.Optional(Type.Union([PlaybackPolicy, Type.Null()])),
  multistream: Type.Optional(Multistream),
  userTags: Type.Optional(UserTags),
  creatorId: Type.Optional(CreatorId),
};

export const StreamCreateBody = Type.Object({ name: StreamName, ...streamOptions }, { additionalProperties: false });
export type StreamCreateBody = Static<typeof StreamCreateBody>;

export const StreamPatchBody = Type.Object(
  {
    name: Type.Optional(StreamName),
    suspended: Type.Optional(
      Type.Boolean({ description: 'true refuses new publishes and cuts the publisher live now off.' }),
    ),
    ...streamOptions,
  },
  { additionalProperties: false },
);
export type StreamPatchBody = Static<typeof StreamPatchBody>;

const ms = { description: 'ms since the epoch' };
const Open = { additionalProperties: true };
const counter = (description: string): TSchema => Type.Number({ description });

export const StreamSchema = Type.Object(
  {
    id: Type.String(),
    kind: Type.String(),
    name: Type.String(),
    streamKey: Type.Optional(
      Type.String({ description: 'The key publishers use: shown to the owner (not in webhook payloads); a secret.' }),
    ),
    playbackId: Type.String(),
    projectId: Type.String(),
    createdAt: Type.Number(ms),
    lastSeen: Type.Number({ description: 'ms since the epoch of the last sign of life while live; 0: never live.' }),
    lastTerminatedAt: Type.Union([Type.Number(ms), Type.Null()]),
    isActive: Type.Boolean(),
    isHealthy: Type.Union([Type.Boolean(), Type.Null()], {
      description:
        "false while the ladder is behind real time or the ingest rate is under the source's own bitrate; null before it was ever live.",
    }),
    issues: Type.Array(Type.String(), { description: 'Why the stream is unhealthy or degraded.' }),
    suspended: Type.Boolean(),
    record: Type.Boolean(),
    profiles: Type.Array(Type.Object({}, Open)),
    multistream: Type.Object({ targets: Type.Array(Type.Object({}, Open)) }, Open),
    ingestRate: counter('Bytes per second the publisher sends, over the last seconds.'),
    outgoingRate: counter('Bytes per second of every rendition together, over the last seconds.'),
    sourceSegments: counter('Segments of the source rendition of the latest session.'),
    transcodedSegments: counter('Segments of the transcoded renditions of the latest session.'),
    sourceSegmentsDuration: counter('Seconds of sourceSegments.'),
    transcodedSegmentsDuration: counter('Seconds of transcodedSegments.'),
    sourceBytes: counter('Bytes of sourceSegments.'),
    transcodedBytes: counter('Bytes of transcodedSegments.'),
    playbackPolicy: Type.Optional(Type.Object({ type: Type.String() }, Open)),
    recordingSpec: Type.Optional(Type.Object({}, Open)),
    userTags: Type.Optional(Type.Object({}, Open)),
    creatorId: Type.Optional(Type.Object({ type: Type.Literal('unverified'), value: Type.String() })),
    rtmpIngestUrl: Type.Optional(
      Type.String({
        description: 'rtmp://HOST:PORT/live: the server for OBS (the key goes apart); absent when RTMP ingest is off.',
      }),
    ),
    srtIngestUrl: Type.Optional(
      Type.String({
        description: 'srt://HOST:PORT?streamid=STREAM_KEY, for the owner; absent when SRT ingest is off.',
      }),
    ),
  },
  Open,
);

/** Where publishers connect, as this API tells its owners (absent: that ingest is off). */
export interface IngestAddress {
  /** The host publishers reach (MEDIAPLANE_PUBLIC_URL's, else the listening host's). */
  host: string;
  rtmpPort: number;
  srtPort: number;
}

/**
 * The Stream as Livepeer's SDK parses it, with this service's ingest URLs. Its live counters
 * are the domain's (LiveCounters) as they are, but for isHealthy: null until first live.
 */
export interface WireStream extends Omit<LiveCounters, 'isHealthy'> {
  id: string;
  kind: 'stream';
  name: string;
  streamKey?: string;
  playbackId: string;
  projectId: string;
  createdAt: number;
  lastSeen: number;
  lastTerminatedAt: number | null;
  isActive: boolean;
  isHealthy: boolean | null;
  suspended: boolean;
  record: boolean;
  profiles: WireProfile[];
  multistream: { targets: { profile: string; videoOnly: boolean; id?: string; spec?: { name?: string } }[] };
  playbackPolicy?: Record<string, unknown>;
  recordingSpec?: { profiles?: WireProfile[] };
  userTags?: Record<string, unknown>;
  creatorId?: { type: 'unverified'; value: string };
  rtmpIngestUrl?: string;
  srtIngestUrl?: string;
}

export type WireProfile = Profile & { fps: number };

/** A profile as the SDK requires it: `fps` always there. */
const wireProfile = (p: Profile): WireProfile => ({ ...p, fps: p.fps ?? 0 });

/** A stream's or session's ladder as the SDK requires it: never null (null is the default ladder). */
export const wireProfiles = (profiles: Profile[] | null): WireProfile[] =>
  (profiles ?? DEFAULT_LIVE_PROFILES).map(wireProfile);

/** A stream's or session's recordingSpec: its profiles as the SDK requires them; `{}` without any. */
export const wireRecordingSpec = (spec: { profiles?: Profile[] | null }): { profiles?: WireProfile[] } =>
  spec.profiles ? { profiles: spec.profiles.map(wireProfile) } : {};

/** The numbers a stream and a session show of their live counters (isHealthy and issues go apart). */
export function wireCounters(
  c: Omit<LiveCounters, 'isHealthy' | 'issues'>,
): Omit<LiveCounters, 'isHealthy' | 'issues'> {
  return {
    ingestRate: c.ingestRate,
    outgoingRate: c.outgoingRate,
    sourceSegments: c.sourceSegments,
    transcodedSegments: c.transcodedSegments,
    sourceSegmentsDuration: c.sourceSegmentsDuration,
    transcodedSegmentsDuration: c.transcodedSegmentsDuration,
    sourceBytes: c.sourceBytes,
    transcodedBytes: c.transcodedBytes,
  };
}

/** The domain's profiles of a body (fps 0 when absent: the source's rate). */
export function profilesOf(given: readonly LiveProfile[]): Profile[] {
  return given.map((p) => ({ ...p, fps: p.fps ?? 0 }));
}

/** Targets as shown: the inline spec's url is a secret and stays out. */
function wireTargets(s: StreamRecord): WireStream['multistream']['targets'] {
  return s.multistream.targets.map((t) => ({
    profile: t.profile,
    videoOnly: t.videoOnly ?? false,
    ...(t.id === undefined ? {} : { id: t.id }),
    ...(t.spec === undefined ? {} : { spec: t.spec.name === undefined ? {} : { name: t.spec.name } }),
  }));
}

function ingestUrls(s: StreamRecord, ingest: IngestAddress | undefined): Partial<WireStream> {
  if (!ingest) return {};
  const host = ingest.host.includes(':') ? `[${ingest.host}]` : ingest.host;
  const urls: Partial<WireStream> = {};
  if (ingest.rtmpPort > 0) urls.rtmpIngestUrl = `rtmp://${host}:${ingest.rtmpPort}/live`;
  if (ingest.srtPort > 0 && s.streamKey)
    urls.srtIngestUrl = `srt://${host}:${ingest.srtPort}?streamid=${encodeURIComponent(s.streamKey)}`;
  return urls;
}

const time = (d: Date | undefined): number | null => (d === undefined ? null : d.getTime());

/**
 * The Stream of spec/API.md section D. `ingest` adds the ingest URLs; a record without its key
 * (a webhook event's) is shown without `streamKey` and `srtIngestUrl`.
 */
export function toWireStream(s: StreamRecord, ingest?: IngestAddress): WireStream {
  const wire: WireStream = {
    id: s.id,
    kind: 'stream',
    name: s.name,
    ...(s.streamKey ? { streamKey: s.streamKey } : {}),
    playbackId: s.playbackId,
    projectId: s.projectId,
    createdAt: s.createdAt.getTime(),
    lastSeen: time(s.lastSeen) ?? 0,
    lastTerminatedAt: time(s.lastTerminatedAt),
    isActive: s.isActive,
    isHealthy: s.isHealthy,
    issues: s.issues,
    suspended: s.suspended,
    record: s.record,
    profiles: wireProfiles(s.profiles),
    multistream: { targets: wireTargets(s) },
    ...wireCounters(s),
    ...ingestUrls(s, ingest),
  };
  if (s.playbackPolicy) wire.playbackPolicy = s.playbackPolicy;
  if (s.recordingSpec) wire.recordingSpec = wireRecordingSpec(s.recordingSpec);
  if (s.userTags) wire.userTags = s.userTags;
  const creatorId = wireCreator(s.creatorId);
  if (creatorId) wire.creatorId = creatorId;
  return wire;
}

/** Where a stream's live media is (api/live-media-routes.ts): its multivariant playlist. */
export const liveMediaKey = (playbackId: string): string => `live/${playbackId}/index.m3u8`;

/**
 * The playback info of a stream, live or not (Livepeer answers an idle stream `live: 0`). The
 * SDK knows only `HLS (TS)` as an HLS source's hrn, so the fMP4 low-latency ladder is named so.
 */
export function toLivePlaybackInfo(s: StreamRecord, base: PublicBase): PlaybackInfo {
  const url = mediaUrl(base, liveMediaKey(s.playbackId));
  const info: PlaybackInfo = {
    type: 'live',
    meta: { live: s.isActive ? 1 : 0, source: [{ hrn: 'HLS (TS)', type: 'html5/application/vnd.apple.mpegurl', url }] },
  };
  if (s.playbackPolicy) info.meta.playbackPolicy = s.playbackPolicy;
  return info;
}

/** A stream as the outbox keeps it (a stream event's `task` column: the row as JSON, without its key). */
export const streamOfEvent = (e: { task: unknown }): StreamRecord => streamFromRow(e.task as StreamRow);

/** Whether an outbox event is a stream's (stream.started, stream.idle). */
export const isStreamEvent = (e: { event: string }): boolean => e.event.startsWith('stream.');
