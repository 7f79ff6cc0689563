import { createHash, randomInt, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Db } from '../db/index.ts';
import { NotFoundError } from '../lib/errors.ts';
import { isUuid } from '../lib/ids.ts';
import { NEWEST_FIRST, olderThanCursor, paged } from '../lib/paging.ts';
import { COUNTER_COLUMNS, type CounterRow, countersFromRow, dateOf, optionalDate } from './counter-rows.ts';
import type { IngestProtocol } from './ingest-types.ts';
import type { Profile } from './profiles.ts';
import { STREAM_ACTIVE } from './session-rows.ts';
import type { MultistreamTarget, StreamRecord } from './types.ts';

// All SQL of live streams, in one place (as assets/store.ts holds the assets'); what a publish
// changes of its stream (live, idle, counters, with their webhook events) is the session
// store's (session-store.ts), in the transactions that change its session.

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

function randomText(length: number): string {
  let s = '';
  for (let i = 0; i < length; i++) s += ALPHABET[randomInt(ALPHABET.length)];
  return s;
}

/**
 * Livepeer's key form (groups joined by `-`), longer: 4 groups of 6 base36 characters, about
 * 124 random bits, so guessing one is hopeless even without the key's rpm.
 */
const newStreamKey = (): string => [6, 6, 6, 6].map(randomText).join('-');
/** 16 random lowercase letters and digits (~82 bits), as an asset's playback id. */
const newPlaybackId = (): string => randomText(16);
const keyHash = (key: string): string => createHash('sha256').update(key).digest('hex');

/** A stream as its row reads (from a query: Date; from an outbox event's JSON: ISO string). */
export interface StreamRow extends CounterRow {
  id: string;
  owner: string;
  project_id: string;
  key_id: string | null;
  name: string;
  stream_key?: string;
  playback_id: string;
  profiles: Profile[] | null;
  record: boolean;
  recording_spec: { profiles?: Profile[] | null } | null;
  playback_policy: Record<string, unknown> | null;
  multistream: { targets?: MultistreamTarget[] } | null;
  user_tags: Record<string, unknown> | null;
  creator_id: unknown;
  suspended: boolean;
  is_active: boolean;
  session_id: string | null;
  protocol: IngestProtocol | null;
  created_at: Date | string;
  last_seen: Date | string | null;
  last_terminated_at: Date | string | null;
}

const ACTIVE = STREAM_ACTIVE;

const COLUMNS = `id, owner, project_id, key_id, name, stream_key, playback_id, profiles, record, recording_spec,
  playback_policy, multistream, user_tags, creator_id, suspended, ${ACTIVE} AS is_active, session_id, protocol,
  ${COUNTER_COLUMNS}, created_at, last_seen, last_terminated_at`;

/**
 * The stream of a row, from a query or from an outbox event (whose row has no key: then
 * `streamKey` is empty, and the wire shape leaves it out).
 */
export function streamFromRow(r: StreamRow): StreamRecord {
  return {
    id: r.id,
    owner: r.owner,
    projectId: r.project_id,
    keyId: r.key_id ?? undefined,
    name: r.name,
    streamKey: r.stream_key ?? '',
    playbackId: r.playback_id,
    profiles: r.profiles,
    record: r.record,
    recordingSpec: r.recording_spec ?? undefined,
    playbackPolicy: r.playback_policy ?? undefined,
    multistream: { targets: r.multistream?.targets ?? [] },
    userTags: r.user_tags ?? undefined,
    creatorId: r.creator_id ?? undefined,
    suspended: r.suspended,
    isActive: r.is_active,
    sessionId: r.session_id ?? undefined,
    protocol: r.protocol ?? undefined,
    ...countersFromRow(r),
    createdAt: dateOf(r.created_at),
    lastSeen: optionalDate(r.last_seen),
    lastTerminatedAt: optionalDate(r.last_terminated_at),
  };
}

/** What POST /api/stream makes. */
export interface CreateStream {
  owner: string;
  projectId: string;
  keyId?: string | undefined;
  name: string;
  profiles?: Profile[] | null | undefined;
  record?: boolean | undefined;
  recordingSpec?: { profiles?: Profile[] | null } | undefined;
  playbackPolicy?: Record<string, unknown> | null | undefined;
  multistream?: { targets?: MultistreamTarget[] } | undefined;
  userTags?: Record<string, unknown> | undefined;
  creatorId?: unknown;
}

/** What PATCH /api/stream/{id} changes; null removes a field that may be absent. */
export interface StreamPatch {
  name?: string | undefined;
  suspended?: boolean | undefined;
  record?: boolean | undefined;
  profiles?: Profile[] | null | undefined;
  recordingSpec?: { profiles?: Profile[] | null } | undefined;
  playbackPolicy?: Record<string, unknown> | null | undefined;
  multistream?: { targets?: MultistreamTarget[] } | undefined;
  userTags?: Record<string, unknown> | undefined;
  creatorId?: unknown;
}

/** The columns a PATCH field writes, in one list: its SQL is built from it. */
const PATCH_COLUMNS: { field: keyof StreamPatch; column: string; json: boolean }[] = [
  { field: 'name', column: 'name', json: false },
  { field: 'suspended', column: 'suspended', json: false },
  { field: 'record', column: 'record', json: false },
  { field: 'profiles', column: 'profiles', json: true },
  { field: 'recordingSpec', column: 'recording_spec', json: true },
  { field: 'playbackPolicy', column: 'playback_policy', json: true },
  { field: 'multistream', column: 'multistream', json: true },
  { field: 'userTags', column: 'user_tags', json: true },
  { field: 'creatorId', column: 'creator_id', json: true },
];

const jsonOrNull = (v: unknown): string | null => (v === undefined || v === null ? null : JSON.stringify(v));

export class StreamStore {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  /** A new stream with a fresh key and playback id. */
  async create(c: CreateStream): Promise<StreamRecord> {
    const key = newStreamKey();
    const rows = await this.#db.query<StreamRow>(
      `INSERT INTO streams (id, owner, project_id, key_id, name, stream_key, stream_key_hash, playback_id, profiles,
         record, recording_spec, playback_policy, multistream, user_tags, creator_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING ${COLUMNS}`,
      [
        randomUUID(),
        c.owner,
        c.projectId,
        c.keyId ?? null,
        c.name,
        key,
        keyHash(key),
        newPlaybackId(),
        jsonOrNull(c.profiles),
        c.record ?? false,
        jsonOrNull(c.recordingSpec),
        jsonOrNull(c.playbackPolicy),
        JSON.stringify({ targets: c.multistream?.targets ?? [] }),
        jsonOrNull(c.userTags),
        jsonOrNull(c.creatorId),
      ],
    );
    return this.#one(rows);
  }

  /** The owner's stream; another owner's, a deleted one or an id that is no UUID: NotFoundError. */
  async get(owner: string, id: string): Promise<StreamRecord> {
    if (!isUuid(id)) throw new NotFoundError();
    return this.#one(
      await this.#db.query<StreamRow>(
        `SELECT ${COLUMNS} FROM streams WHERE id = $1 AND owner = $2 AND deleted_at IS NULL`,
        [id, owner],
      ),
    );
  }

  /** The owner's streams, newest first; the cursor is the last id of the previous page. */
  async list(
    owner: string,
    o: { limit: number; cursor?: string | undefined },
  ): Promise<{ streams: StreamRecord[]; next: string | null }> {
    if (o.cursor !== undefined && !isUuid(o.cursor)) return { streams: [], next: null };
    const rows = await this.#db.query<StreamRow>(
      `SELECT ${COLUMNS} FROM streams WHERE owner = $1 AND deleted_at IS NULL
         AND ${olderThanCursor({ table: 'streams', cursor: '$2', scope: 'owner = $1' })} ${NEWEST_FIRST} LIMIT $3`,
      [owner, o.cursor ?? null, o.limit + 1],
    );
    const { items, next } = paged(rows, o.limit);
    return { streams: items.map(streamFromRow), next };
  }

  /** PATCH: the fields given (null clears profiles, playbackPolicy); the stream as it is now. */
  async update(owner: string, id: string, patch: StreamPatch): Promise<StreamRecord> {
    if (!isUuid(id)) throw new NotFoundError();
    const params: unknown[] = [id, owner];
    const sets = PATCH_COLUMNS.filter((c) => patch[c.field] !== undefined).map((c) => {
      const v = patch[c.field];
      params.push(c.json ? jsonOrNull(v) : v);
      return `${c.column} = $${params.length}${c.json ? '::jsonb' : ''}`;
    });
    if (sets.length === 0) return this.get(owner, id);
    return this.#one(
      await this.#db.query<StreamRow>(
        `UPDATE streams SET ${sets.join(', ')} WHERE id = $1 AND owner = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
        params,
      ),
    );
  }

  /** DELETE: the stream is gone from every read and its key publishes no more; the stream as it was. */
  async remove(owner: string, id: string): Promise<StreamRecord> {
    if (!isUuid(id)) throw new NotFoundError();
    return this.#one(
      await this.#db.query<StreamRow>(
        `UPDATE streams SET deleted_at = now() WHERE id = $1 AND owner = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
        [id, owner],
      ),
    );
  }

  /** The owner cut the publisher off (terminate): `lastTerminatedAt`. */
  async terminated(owner: string, id: string): Promise<void> {
    await this.#db.query(
      'UPDATE streams SET last_terminated_at = now() WHERE id = $1 AND owner = $2 AND deleted_at IS NULL',
      [id, owner],
    );
  }

  /** The stream a playback id names (GET /api/playback/{playbackId}); undefined when none. */
  async byPlaybackId(playbackId: string): Promise<StreamRecord | undefined> {
    const rows = await this.#db.query<StreamRow>(
      `SELECT ${COLUMNS} FROM streams WHERE playback_id = $1 AND deleted_at IS NULL`,
      [playbackId],
    );
    return rows[0] && streamFromRow(rows[0]);
  }

  /**
   * The stream a publisher's key names: found by the key's hash, then the key itself compared
   * in constant time. undefined for an unknown key or a deleted stream (suspended ones are
   * returned: the gate says why it refuses).
   */
  async findByKey(streamKey: string): Promise<StreamRecord | undefined> {
    const rows = await this.#db.query<StreamRow>(
      `SELECT ${COLUMNS} FROM streams WHERE stream_key_hash = $1 AND deleted_at IS NULL`,
      [keyHash(streamKey)],
    );
    const row = rows[0];
    if (!row?.stream_key) return undefined;
    const given = Buffer.from(streamKey);
    const kept = Buffer.from(row.stream_key);
    return given.length === kept.length && timingSafeEqual(given, kept) ? streamFromRow(row) : undefined;
  }

  #one(rows: StreamRow[]): StreamRecord {
    const row = rows[0];
    if (!row) throw new NotFoundError();
    return streamFromRow(row);
  }
}
