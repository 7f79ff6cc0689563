import { leaseHeld } from './node-registry.ts';
import { COUNTER_COLUMNS, type CounterRow, countersFromRow, dateOf, optionalDate } from './counter-rows.ts';
import type { Profile } from './profiles.ts';
import type { SessionRecord } from './types.ts';

// A session's row (stream_sessions, migration 503) and the record made of it: one reading for
// the store's queries and for an outbox event's JSON (dates as ISO strings there).

export interface SessionRow extends CounterRow {
  id: string;
  stream_id: string;
  owner: string;
  project_id: string;
  name: string;
  playback_id: string;
  profiles: Profile[] | null;
  record: boolean;
  recording_spec: { profiles?: Profile[] | null } | null;
  state: SessionRecord['state'];
  node_id: string | null;
  created_at: Date | string;
  last_seen: Date | string | null;
  ended_at: Date | string | null;
  recording_queued_at: Date | string | null;
}

export const SESSION_COLUMNS = `id, stream_id, owner, project_id, name, playback_id, profiles, record, recording_spec,
  state, node_id, ${COUNTER_COLUMNS}, created_at, last_seen, ended_at, recording_queued_at`;

export function sessionFromRow(r: SessionRow): SessionRecord {
  return {
    id: r.id,
    streamId: r.stream_id,
    owner: r.owner,
    projectId: r.project_id,
    name: r.name,
    playbackId: r.playback_id,
    profiles: r.profiles,
    record: r.record,
    recordingSpec: r.recording_spec ?? undefined,
    state: r.state,
    nodeId: r.node_id ?? undefined,
    ...countersFromRow(r),
    createdAt: dateOf(r.created_at),
    lastSeen: optionalDate(r.last_seen),
    endedAt: optionalDate(r.ended_at),
    recordingQueuedAt: optionalDate(r.recording_queued_at),
  };
}

/**
 * A stream is live when its current session is, and the node holding that session still holds
 * its lease (node-registry.ts): a stream whose node was killed reads idle a few seconds later.
 */
export const STREAM_ACTIVE = `(is_active AND EXISTS (SELECT 1 FROM stream_sessions ss
  WHERE ss.id = streams.session_id AND ss.state = 'live' AND ${leaseHeld('ss.node_id')}))`;
