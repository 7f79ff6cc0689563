import { createHash, randomBytes, randomInt, randomUUID } from 'node:crypto';
import type { Db, Queryable } from '../db/index.ts';
import { InvalidStateError, NotFoundError, PayloadTooLargeError } from '../lib/errors.ts';
import { isUuid } from '../lib/ids.ts';
import { paged } from '../lib/paging.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import type { TaskRow, TaskStore } from '../tasks/index.ts';
import { assetPrefix, assetSourceKey } from './keys.ts';
import type { AssetRow, CreateAsset, StagedBytes, UploadGrant, UploadSessions } from './types.ts';

export type { AssetOutput, AssetRow, AssetTrack, CreateAsset } from './types.ts';

// All SQL of assets, in one place (as tasks/store.ts and queue.ts hold the tasks'). What a
// task does to its asset is not here: the trigger of migration 010 moves the asset with its
// task, in the task's own statement. Every change here writes its event through the same
// SQL function as the trigger (asset_event), in the change's transaction.

/** The failure of an upload task whose URL expired with the bytes not all sent. */
export const UPLOAD_EXPIRED_MESSAGE = 'the upload was not finished before its URL expired';

/** How long an asset whose task was running stays `deleting` before the sweep removes its files again. */
const DEFAULT_DELETE_GRACE_MS = 5 * 60_000;

const PLAYBACK_ID_LENGTH = 16;
const PLAYBACK_ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** 16 random lowercase letters and digits (~82 bits), as Livepeer's playback ids look. */
function newPlaybackId(): string {
  let id = '';
  for (let i = 0; i < PLAYBACK_ID_LENGTH; i++) id += PLAYBACK_ID_ALPHABET[randomInt(PLAYBACK_ID_ALPHABET.length)];
  return id;
}

/** Upload tokens are 256 random bits: only their sha256 is stored (like API keys). */
const tokenHash = (token: string): string => createHash('sha256').update(token).digest('hex');

const ASSET_COLUMNS = `a.id, a.owner, a.project_id, a.playback_id, a.name, a.type, a.phase, a.error_message,
  a.task_id, a.source, a.spec, a.playback_policy, a.creator_id, a.output, a.storage, a.created_at, a.updated_at,
  CASE WHEN a.phase = 'processing' THEN t.progress END AS progress, t.playable_at`;
const FROM_ASSETS = 'assets a LEFT JOIN tasks t ON t.id = a.task_id';

/** Thrown inside a transaction to roll it back with an answer (not an error). */
class Refused extends Error {}

/** An upload that would take its owner's unfinished uploads past MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER. */
export class StagedBytesLimitError extends PayloadTooLargeError {
  constructor(o: { cap: number; held: number }) {
    super(
      `the owner's unfinished uploads may hold at most ${o.cap} bytes (MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER) ` +
        `and the others hold ${o.held}: finish or delete pending uploads first (DELETE /api/asset/{id} frees an upload's bytes within a minute, ending a tus upload with DELETE at once)`,
    );
  }
}

// Class of the owner's advisory lock while a reservation of staged bytes is counted (the
// migration's number; key limits take class 400).
const STAGED_BYTES_LOCK = 15;

export interface AssetStoreOptions {
  tasks: TaskStore;
  store: BuiltinStore;
  /** How long an upload URL stays valid (MEDIAPLANE_UPLOAD_URL_TTL_MS). */
  uploadExpiryMs: number;
  /**
   * How long a deleted asset whose task was running stays `deleting` before `finishDeletes`
   * removes its files again: the cancelled worker may still be writing one (default 5 min;
   * a worker stops at its next heartbeat, or its lease, at the latest).
   */
  deleteGraceMs?: number;
  /** Bytes an owner's unfinished uploads may hold at once (MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER). */
  maxStagedBytesPerOwner: number;
}

export class AssetStore implements UploadSessions, StagedBytes {
  readonly #db: Db;
  readonly #o: AssetStoreOptions;

  constructor(db: Db, o: AssetStoreOptions) {
    this.#db = db;
    this.#o = o;
  }

  /**
   * The asset, its task and (for a direct upload) the upload token, in one transaction: the
   * owner's queue limit refuses both (TooManyRequestsError) or neither is kept. The token is
   * returned once and never stored.
   */
  async create(c: CreateAsset): Promise<{ asset: AssetRow; task: TaskRow; uploadToken?: string }> {
    const id = c.id ?? randomUUID();
    const playbackId = newPlaybackId();
    const token = c.upload ? randomBytes(32).toString('base64url') : undefined;
    return this.#db.tx(async (q) => {
      const task = await this.#o.tasks.create(
        {
          owner: c.owner,
          projectId: c.projectId,
          type: c.task.type,
          params: {
            ...c.task.params,
            assetId: id,
            playbackId,
            ...(c.upload ? { input: { key: assetSourceKey(playbackId) } } : {}),
          },
          requesterId: c.requesterId,
          maxQueuedPerOwner: c.maxQueuedPerOwner,
          key: c.key,
          id: randomUUID(),
          phase: c.upload ? 'pending' : 'waiting',
        },
        q,
      );
      await q.query(
        `INSERT INTO assets (id, owner, project_id, playback_id, name, phase, task_id, source, spec, playback_policy, creator_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [
          id,
          c.owner,
          c.projectId,
          playbackId,
          c.name,
          c.upload ? 'uploading' : 'waiting',
          task.id,
          JSON.stringify(c.source),
          JSON.stringify(c.spec),
          c.playbackPolicy === undefined ? null : JSON.stringify(c.playbackPolicy),
          c.creatorId === undefined ? null : JSON.stringify(c.creatorId),
        ],
      );
      if (token)
        await q.query(
          `INSERT INTO asset_uploads (asset_id, owner, token_hash, expires_at)
           VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')`,
          [id, c.owner, tokenHash(token), this.#o.uploadExpiryMs],
        );
      const asset = await this.#event(q, id, 'asset.created');
      await c.also?.(q);
      return { asset, task, ...(token ? { uploadToken: token } : {}) };
    });
  }

  /** Whether an asset with this id was ever made (whatever its owner or phase, deleted ones too). */
  async exists(id: string): Promise<boolean> {
    if (!isUuid(id)) return false;
    return (await this.#db.query('SELECT 1 FROM assets WHERE id = $1', [id])).length > 0;
  }

  /** The owner's asset; another owner's, a deleted one or an id that is no UUID: NotFoundError. */
  async get(owner: string, id: string): Promise<AssetRow> {
    if (!isUuid(id)) throw new NotFoundError();
    const rows = await this.#db.query<AssetRow>(
      `SELECT ${ASSET_COLUMNS} FROM ${FROM_ASSETS} WHERE a.id = $1 AND a.owner = $2 AND a.deleted_at IS NULL`,
      [id, owner],
    );
    const row = rows[0];
    if (!row) throw new NotFoundError();
    return row;
  }

  /** Newest first, deleted ones left out, paged; `clipsOf`: only the clips of a live stream (their sourceId) or session. */
  async list(
    owner: string,
    o: { limit: number; cursor?: string | undefined; clipsOf?: { sourceId: string } | { sessionId: string } },
  ): Promise<{ assets: AssetRow[]; next: string | null }> {
    if (o.cursor !== undefined && !isUuid(o.cursor)) return { assets: [], next: null };
    const [field, value] = Object.entries(o.clipsOf ?? {})[0] ?? [null, null];
    // The cursor is the last id of the previous page (deleted since or not); (created_at, id) orders ties.
    const rows = await this.#db.query<AssetRow>(
      `SELECT ${ASSET_COLUMNS} FROM ${FROM_ASSETS} WHERE a.owner = $1 AND a.deleted_at IS NULL
         AND ($2::uuid IS NULL OR (a.created_at, a.id) < (SELECT created_at, id FROM assets WHERE id = $2 AND owner = $1))
         AND ($4::text IS NULL OR (a.source->>'type' = 'clip' AND a.source->>$4 = $5))
       ORDER BY a.created_at DESC, a.id DESC LIMIT $3`,
      [owner, o.cursor ?? null, o.limit + 1, field, value],
    );
    const { items, next } = paged(rows, o.limit);
    return { assets: items, next };
  }

  /** PATCH: a new name and/or playback policy (null removes it); an `asset.updated` event. */
  async update(
    owner: string,
    id: string,
    p: { name?: string; playbackPolicy?: Record<string, unknown> | null },
  ): Promise<AssetRow> {
    if (!isUuid(id)) throw new NotFoundError();
    return this.#db.tx(async (q) => {
      const rows = await q.query(
        `UPDATE assets SET name = COALESCE($3, name),
           playback_policy = CASE WHEN $4::boolean THEN $5::jsonb ELSE playback_policy END, updated_at = now()
         WHERE id = $1 AND owner = $2 AND deleted_at IS NULL RETURNING id`,
        [
          id,
          owner,
          p.name ?? null,
          p.playbackPolicy !== undefined,
          p.playbackPolicy ? JSON.stringify(p.playbackPolicy) : null,
        ],
      );
      if (rows.length === 0) throw new NotFoundError();
      return this.#event(q, id, 'asset.updated');
    });
  }

  /**
   * DELETE: the asset becomes `deleting` (so its task no longer moves it), its task is
   * cancelled, every file under `asset/<playbackId>/` is removed, and it is `deleted` with an
   * `asset.deleted` event. When the store fails, the error is thrown and the asset stays
   * `deleting`: a later remove, or `finishDeletes`, completes it. When the task was running,
   * its worker may still write a file as it stops: the asset stays `deleting` until
   * `finishDeletes` removes the files once more after the grace period.
   */
  async remove(owner: string, id: string): Promise<void> {
    if (!isUuid(id)) throw new NotFoundError();
    const rows = await this.#db.query<{ playback_id: string; task_id: string }>(
      `UPDATE assets SET phase = 'deleting', updated_at = now()
       WHERE id = $1 AND owner = $2 AND deleted_at IS NULL RETURNING playback_id, task_id`,
      [id, owner],
    );
    const row = rows[0];
    if (!row) throw new NotFoundError();
    const running = await this.#cancelTask(owner, row.task_id);
    await this.#o.store.removePrefix(assetPrefix(row.playback_id));
    if (!running) await this.#deleted(id);
  }

  /**
   * Finishes up to `limit` deletes left `deleting` for longer than the grace period (the store
   * failed, or the task was running); how many it finished. For a sweep (lib/sweep.ts): a
   * store still failing throws, and the asset waits for the next sweep.
   */
  async finishDeletes(limit: number): Promise<number> {
    const rows = await this.#db.query<{ id: string; playback_id: string }>(
      `SELECT id, playback_id FROM assets WHERE phase = 'deleting'
         AND updated_at < now() - $1 * interval '1 millisecond' ORDER BY updated_at LIMIT $2`,
      [this.#o.deleteGraceMs ?? DEFAULT_DELETE_GRACE_MS, limit],
    );
    for (const r of rows) {
      await this.#o.store.removePrefix(assetPrefix(r.playback_id));
      await this.#deleted(r.id);
    }
    return rows.length;
  }

  /** Any owner's asset by its playback id, unless it is being deleted or is deleted (playback). */
  async byPlaybackId(playbackId: string): Promise<AssetRow | undefined> {
    const rows = await this.#db.query<AssetRow>(
      `SELECT ${ASSET_COLUMNS} FROM ${FROM_ASSETS} WHERE a.playback_id = $1 AND a.phase NOT IN ('deleting', 'deleted')`,
      [playbackId],
    );
    return rows[0];
  }

  async grant(token: string): Promise<UploadGrant | undefined> {
    // `uploading` is the asset of a pending task: not deleted, its task not cancelled.
    const rows = await this.#db.query<UploadGrant>(
      `SELECT a.id AS "assetId", a.playback_id AS "playbackId", a.task_id AS "taskId", a.owner, u.expires_at AS "expiresAt"
       FROM asset_uploads u JOIN assets a ON a.id = u.asset_id
       WHERE u.token_hash = $1 AND u.finished_at IS NULL AND u.expires_at > now() AND a.phase = 'uploading'`,
      [tokenHash(token)],
    );
    return rows[0];
  }

  /**
   * An upload that began before its URL expired may finish after it, until the sweep
   * (`expire`) has failed it. Finishing twice is no error (a retried request): true.
   */
  async finish(assetId: string, size: number): Promise<boolean> {
    if (!isUuid(assetId)) return false;
    try {
      return await this.#db.tx(async (q) => {
        const rows = await q.query<{ task_id: string }>(
          `UPDATE asset_uploads u SET finished_at = now(), size = $2 FROM assets a
           WHERE u.asset_id = $1 AND a.id = u.asset_id AND u.finished_at IS NULL AND a.phase = 'uploading'
           RETURNING a.task_id`,
          [assetId, size],
        );
        const row = rows[0];
        if (!row) {
          const done = await q.query(`SELECT 1 FROM asset_uploads WHERE asset_id = $1 AND finished_at IS NOT NULL`, [
            assetId,
          ]);
          return done.length > 0;
        }
        // The trigger moves the asset to `waiting` with the task.
        if (!(await this.#o.tasks.enqueue(row.task_id, q))) throw new Refused();
        return true;
      });
    } catch (err) {
      if (err instanceof Refused) return false;
      throw err;
    }
  }

  async expire(limit: number): Promise<string[]> {
    return this.#db.tx(async (q) => {
      // The row goes: its token grants nothing any more, and a second sweep does not find it.
      const rows = await q.query<{ asset_id: string; task_id: string }>(
        `DELETE FROM asset_uploads u USING assets a
         WHERE a.id = u.asset_id AND u.asset_id IN (
           SELECT asset_id FROM asset_uploads WHERE finished_at IS NULL AND expires_at <= now()
           ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING u.asset_id::text AS asset_id, a.task_id::text AS task_id`,
        [limit],
      );
      // The trigger fails the asset with its task (one deleted meanwhile stays as it is).
      await this.#o.tasks.failPending(
        rows.map((r) => r.task_id),
        UPLOAD_EXPIRED_MESSAGE,
        q,
      );
      return rows.map((r) => r.asset_id);
    });
  }

  async stage(assetId: string, bytes: { atLeast: number; atMost: number }): Promise<number> {
    if (!isUuid(assetId)) throw new NotFoundError();
    const cap = this.#o.maxStagedBytesPerOwner;
    return this.#db.tx(async (q) => {
      // The owner's lock, held to the commit: a reservation in another process waits and then
      // counts this one (each statement of a READ COMMITTED transaction sees what committed before it).
      const upload = await q.query<{ owner: string }>(
        `SELECT u.owner, pg_advisory_xact_lock($2, hashtext(u.owner)) FROM asset_uploads u JOIN assets a ON a.id = u.asset_id
         WHERE u.asset_id = $1 AND u.finished_at IS NULL AND a.phase = 'uploading'`,
        [assetId, STAGED_BYTES_LOCK],
      );
      const owner = upload[0]?.owner;
      if (owner === undefined) throw new NotFoundError();
      // Every unfinished upload, whatever its asset's phase: a deleted asset's bytes stay on a
      // disk until the staging sweep frees them (unstage), and count until then.
      const others = await q.query<{ held: string }>(
        `SELECT COALESCE(sum(staged_bytes), 0)::text AS held FROM asset_uploads
         WHERE owner = $1 AND finished_at IS NULL AND asset_id <> $2`,
        [owner, assetId],
      );
      const held = Number(others[0]?.held ?? 0);
      if (held + bytes.atLeast > cap) throw new StagedBytesLimitError({ cap, held });
      const staged = Math.min(bytes.atMost, cap - held);
      await q.query('UPDATE asset_uploads SET staged_bytes = $2 WHERE asset_id = $1', [assetId, staged]);
      return staged;
    });
  }

  async ended(assetIds: readonly string[]): Promise<string[]> {
    const ids = assetIds.filter(isUuid);
    if (ids.length === 0) return [];
    // An id with no upload row at all has ended too (expired and swept, or never an upload).
    const rows = await this.#db.query<{ id: string }>(
      `SELECT i.id::text AS id FROM unnest($1::uuid[]) AS i(id)
       LEFT JOIN asset_uploads u ON u.asset_id = i.id LEFT JOIN assets a ON a.id = u.asset_id
       WHERE u.asset_id IS NULL OR u.finished_at IS NOT NULL OR a.phase <> 'uploading'`,
      [ids],
    );
    return rows.map((r) => r.id);
  }

  async unstage(assetId: string): Promise<void> {
    if (!isUuid(assetId)) return;
    await this.#db.query('UPDATE asset_uploads SET staged_bytes = 0 WHERE asset_id = $1 AND staged_bytes <> 0', [
      assetId,
    ]);
  }

  /** Writes the asset's event (the SQL function of migration 010) and reads it back, in `q`. */
  async #event(q: Queryable, id: string, event: string): Promise<AssetRow> {
    await q.query('SELECT asset_event($1, $2)', [id, event]);
    const rows = await q.query<AssetRow>(`SELECT ${ASSET_COLUMNS} FROM ${FROM_ASSETS} WHERE a.id = $1`, [id]);
    const row = rows[0];
    if (!row) throw new NotFoundError();
    return row;
  }

  /** The `deleting` asset is `deleted`, with its event. */
  async #deleted(id: string): Promise<void> {
    await this.#db.tx(async (q) => {
      const rows = await q.query(
        `UPDATE assets SET phase = 'deleted', deleted_at = now(), updated_at = now()
         WHERE id = $1 AND phase = 'deleting' RETURNING id`,
        [id],
      );
      if (rows.length > 0) await q.query('SELECT asset_event($1, $2)', [id, 'asset.deleted']);
    });
  }

  /**
   * Cancels the asset's task if it may still run (TaskStore.cancel); whether a worker may
   * have been running it: it was running, or was claimed between the look and the cancel.
   */
  async #cancelTask(owner: string, taskId: string): Promise<boolean> {
    const before = await this.#o.tasks.get(owner, taskId);
    if (!['pending', 'waiting', 'running'].includes(before.phase)) return false;
    try {
      const after = await this.#o.tasks.cancel(owner, taskId);
      return before.phase === 'running' || after.attempts > before.attempts;
    } catch (err) {
      // It ended meanwhile: nothing to stop, and a worker that ended it writes nothing more.
      if (err instanceof InvalidStateError) return false;
      throw err;
    }
  }
}
