import { randomUUID } from 'node:crypto';
import type { Db } from '../../db/index.ts';
import { NotFoundError } from '../../lib/errors.ts';
import { isUuid } from '../../lib/ids.ts';
import { NEWEST_FIRST, olderThanCursor, paged } from '../../lib/paging.ts';
import { dateOf } from '../counter-rows.ts';
import type { StreamEventName } from '../event-names.ts';

// All SQL of saved restream targets (migration 505), and the multistream.* events written
// through the outbox's live_event (migration 502). A target's url holds another service's
// stream key: it is read here for the pusher and the owner's checks, and no wire shape has it.

/** A saved restream target as the store keeps it. `url` is a secret. */
export interface MultistreamTargetRecord {
  id: string;
  owner: string;
  projectId: string;
  name?: string | undefined;
  url: string;
  disabled: boolean;
  createdAt: Date;
}

export interface CreateMultistreamTarget {
  owner: string;
  projectId: string;
  name?: string | undefined;
  url: string;
  disabled?: boolean | undefined;
}

export interface MultistreamTargetPatch {
  name?: string | undefined;
  url?: string | undefined;
  disabled?: boolean | undefined;
}

/** What a multistream.* event says of its target: never its url. */
export interface TargetShown {
  id: string;
  name?: string | undefined;
  profile: string;
  videoOnly: boolean;
}

interface TargetRow {
  id: string;
  owner: string;
  project_id: string;
  name: string | null;
  url: string;
  disabled: boolean;
  created_at: Date | string;
}

const COLUMNS = 'id, owner, project_id, name, url, disabled, created_at';

function targetFromRow(r: TargetRow): MultistreamTargetRecord {
  return {
    id: r.id,
    owner: r.owner,
    projectId: r.project_id,
    ...(r.name === null ? {} : { name: r.name }),
    url: r.url,
    disabled: r.disabled,
    createdAt: dateOf(r.created_at),
  };
}

export class MultistreamTargetStore {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  async create(c: CreateMultistreamTarget): Promise<MultistreamTargetRecord> {
    const rows = await this.#db.query<TargetRow>(
      `INSERT INTO multistream_targets (id, owner, project_id, name, url, disabled)
       VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
      [randomUUID(), c.owner, c.projectId, c.name ?? null, c.url, c.disabled ?? false],
    );
    return this.#one(rows);
  }

  /** The owner's target; another owner's, a deleted one or an id that is no UUID: NotFoundError. */
  async get(owner: string, id: string): Promise<MultistreamTargetRecord> {
    if (!isUuid(id)) throw new NotFoundError();
    return this.#one(
      await this.#db.query<TargetRow>(
        `SELECT ${COLUMNS} FROM multistream_targets WHERE id = $1 AND owner = $2 AND deleted_at IS NULL`,
        [id, owner],
      ),
    );
  }

  /** The owner's targets, newest first; the cursor is the last id of the previous page. */
  async list(
    owner: string,
    o: { limit: number; cursor?: string | undefined },
  ): Promise<{ targets: MultistreamTargetRecord[]; next: string | null }> {
    if (o.cursor !== undefined && !isUuid(o.cursor)) return { targets: [], next: null };
    const rows = await this.#db.query<TargetRow>(
      `SELECT ${COLUMNS} FROM multistream_targets WHERE owner = $1 AND deleted_at IS NULL
         AND ${olderThanCursor({ table: 'multistream_targets', cursor: '$2', scope: 'owner = $1' })} ${NEWEST_FIRST} LIMIT $3`,
      [owner, o.cursor ?? null, o.limit + 1],
    );
    const { items, next } = paged(rows, o.limit);
    return { targets: items.map(targetFromRow), next };
  }

  /** The fields given; the target as it is now. */
  async update(owner: string, id: string, p: MultistreamTargetPatch): Promise<MultistreamTargetRecord> {
    if (!isUuid(id)) throw new NotFoundError();
    return this.#one(
      await this.#db.query<TargetRow>(
        `UPDATE multistream_targets SET name = CASE WHEN $3::boolean THEN $4 ELSE name END,
           url = COALESCE($5, url), disabled = COALESCE($6, disabled)
         WHERE id = $1 AND owner = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
        [id, owner, p.name !== undefined, p.name ?? null, p.url ?? null, p.disabled ?? null],
      ),
    );
  }

  /** Gone from every read; streams that name it push to it no more. */
  async remove(owner: string, id: string): Promise<void> {
    if (!isUuid(id)) throw new NotFoundError();
    this.#one(
      await this.#db.query<TargetRow>(
        `UPDATE multistream_targets SET deleted_at = now() WHERE id = $1 AND owner = $2 AND deleted_at IS NULL
         RETURNING ${COLUMNS}`,
        [id, owner],
      ),
    );
  }

  /** The owner's live targets among `ids` (the others are another owner's, deleted, or no target). */
  async owned(owner: string, ids: readonly string[]): Promise<Map<string, MultistreamTargetRecord>> {
    const valid = ids.filter(isUuid);
    if (valid.length === 0) return new Map();
    const rows = await this.#db.query<TargetRow>(
      `SELECT ${COLUMNS} FROM multistream_targets
       WHERE owner = $1 AND id = ANY($2::uuid[]) AND deleted_at IS NULL`,
      [owner, valid],
    );
    return new Map(rows.map((r) => [r.id, targetFromRow(r)]));
  }

  /** Writes `event` of stream `streamId` into the outbox with the target as shown (no url). */
  async event(streamId: string, event: StreamEventName, target: TargetShown): Promise<void> {
    const shown = {
      id: target.id,
      ...(target.name === undefined ? {} : { name: target.name }),
      profile: target.profile,
      videoOnly: target.videoOnly,
    };
    await this.#db.query('SELECT live_event($1, $2, $3::jsonb)', [streamId, event, JSON.stringify({ target: shown })]);
  }

  #one(rows: TargetRow[]): MultistreamTargetRecord {
    const row = rows[0];
    if (!row) throw new NotFoundError();
    return targetFromRow(row);
  }
}
