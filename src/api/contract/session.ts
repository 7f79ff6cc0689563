import { type Static, type TSchema, Type } from '@sinclair/typebox';
import type { AssetOutput, AssetPhase } from '../../assets/index.ts';
import type { LiveCounters, SessionRecord } from '../../live/index.ts';
import type { PublicBase } from '../public-base.ts';
import { recordingUrls } from './asset.ts';
import { type WireProfile, wireCounters, wireProfiles, wireRecordingSpec } from './stream.ts';

// The wire contract of live sessions (spec/API.md section D): the Session as the `livepeer`
// SDK 3.5 parses it (components/session.ts: `name` required; `createdAt`, `lastSeen` numbers;
// `profiles` an array, never null; `recordingStatus` one of five words; `recordingUrl` and
// `mp4Url` absent rather than null) and the query of the lists.

const Open = { additionalProperties: true };
const counter = (description: string): TSchema => Type.Number({ description });

export const RECORDING_STATUSES = ['waiting', 'ready', 'failed', 'deleted', 'none'] as const;
export type RecordingStatus = (typeof RECORDING_STATUSES)[number];

export const SessionSchema = Type.Object(
  {
    id: Type.String(),
    kind: Type.String(),
    name: Type.String({ description: "The stream's name." }),
    parentId: Type.String({ description: 'The stream the session is of.' }),
    projectId: Type.String(),
    playbackId: Type.String({ description: "The stream's playbackId." }),
    createdAt: Type.Number({ description: 'ms since the epoch' }),
    lastSeen: Type.Number({ description: "ms since the epoch of the publisher's last data." }),
    isHealthy: Type.Union([Type.Boolean(), Type.Null()]),
    issues: Type.Array(Type.String()),
    record: Type.Boolean(),
    recordingStatus: Type.Union(
      RECORDING_STATUSES.map((s) => Type.Literal(s)),
      {
        description:
          "The recording's: waiting until its asset is ready, ready, failed, deleted; none when the session is not recorded.",
      },
    ),
    recordingUrl: Type.Optional(Type.String({ description: "The recording's HLS playlist, once ready." })),
    mp4Url: Type.Optional(Type.String({ description: "The recording's MP4, once ready." })),
    profiles: Type.Array(Type.Object({}, Open)),
    recordingSpec: Type.Optional(Type.Object({}, Open)),
    ingestRate: counter('Bytes per second the publisher sends (0 once it went).'),
    outgoingRate: counter('Bytes per second of every rendition together.'),
    sourceSegments: counter('Segments of the source rendition.'),
    transcodedSegments: counter('Segments of the transcoded renditions.'),
    sourceSegmentsDuration: counter('Seconds of sourceSegments.'),
    transcodedSegmentsDuration: counter('Seconds of transcodedSegments.'),
    sourceBytes: counter('Bytes of sourceSegments.'),
    transcodedBytes: counter('Bytes of transcodedSegments.'),
  },
  Open,
);

/** The Session of spec/API.md section D. */
export interface WireSession extends Omit<LiveCounters, 'isHealthy'> {
  id: string;
  kind: 'stream';
  name: string;
  parentId: string;
  projectId: string;
  playbackId: string;
  createdAt: number;
  lastSeen: number;
  isHealthy: boolean | null;
  record: boolean;
  recordingStatus: RecordingStatus;
  recordingUrl?: string;
  mp4Url?: string;
  profiles: WireProfile[];
  recordingSpec?: { profiles?: WireProfile[] };
}

/** What the routes know of a session's recording asset (its id is the session's): none yet, gone, or its phase. */
export type SessionRecording =
  | undefined
  | 'deleted'
  | { phase: AssetPhase; output?: Pick<AssetOutput, 'hls' | 'source'> | null | undefined };

/** `recordingStatus` from the recording asset's phase: waiting while there is none or it is being made. */
export function recordingStatusOf(record: boolean, recording: SessionRecording): RecordingStatus {
  if (!record) return 'none';
  if (recording === undefined) return 'waiting';
  if (recording === 'deleted') return 'deleted';
  switch (recording.phase) {
    case 'ready':
      return 'ready';
    case 'failed':
      return 'failed';
    case 'deleting':
    case 'deleted':
      return 'deleted';
    default:
      return 'waiting';
  }
}

export function toWireSession(s: SessionRecord, recording: SessionRecording, base: PublicBase): WireSession {
  const status = recordingStatusOf(s.record, recording);
  const urls = status === 'ready' && typeof recording === 'object' ? recordingUrls(recording.output, base) : {};
  const wire: WireSession = {
    id: s.id,
    kind: 'stream',
    name: s.name,
    parentId: s.streamId,
    projectId: s.projectId,
    playbackId: s.playbackId,
    createdAt: s.createdAt.getTime(),
    lastSeen: (s.lastSeen ?? s.createdAt).getTime(),
    isHealthy: s.isHealthy,
    issues: s.issues,
    record: s.record,
    recordingStatus: status,
    ...urls,
    profiles: wireProfiles(s.profiles),
    ...wireCounters(s),
  };
  if (s.recordingSpec) wire.recordingSpec = wireRecordingSpec(s.recordingSpec);
  return wire;
}

/** `?record=` of GET /api/stream/{id}/sessions: the SDK sends a boolean or an integer, form-encoded. */
export const SessionListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    cursor: Type.Optional(Type.String({ maxLength: 64 })),
    record: Type.Optional(
      Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')], {
        description: 'true or 1: only recorded sessions; false or 0: only the others.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type SessionListQuery = Static<typeof SessionListQuery>;

/** The `record` filter of a list query; undefined: every session. */
export function recordFilter(q: SessionListQuery): boolean | undefined {
  if (q.record === undefined) return undefined;
  return q.record === 'true' || q.record === '1';
}
