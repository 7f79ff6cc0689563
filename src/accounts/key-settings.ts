// Reading and writing the limit settings of keys and owners: the CLI writes them, the owner
// reads them through the API (GET /api/key/{id}). All the SQL on those columns, derived from
// the table of settings (limit-settings.ts).

import type { Queryable } from '../db/index.ts';
import { NotFoundError } from '../lib/errors.ts';
import { isUuid } from '../lib/ids.ts';
import {
  LIMIT_COLUMNS,
  LIMIT_SETTINGS,
  type LimitColumns,
  type LimitDescriptor,
  type LimitKind,
  type OwnerLimitColumns,
  OWNER_SETTINGS,
} from './limit-settings.ts';
import { checkSettings, effectiveLimits, type KeyLimits, type LimitSettings, settingsOf } from './limits.ts';

/** A key as its owner sees it: its own settings, its owner's defaults, and the limits that follow. */
export interface KeyView {
  id: string;
  owner: string;
  prefix: string;
  createdAt: Date;
  revokedAt: Date | null;
  expiresAt: Date | null;
  /** Set on the key (null: the owner's default; 0: no limit). */
  settings: ReturnType<typeof settingsOf>;
  /** The owner's defaults (null: none). */
  ownerDefaults: ReturnType<typeof settingsOf>;
  /** What the key is held to. */
  limits: KeyLimits | undefined;
}

/** Each kind's column in SQL: the cast of a value written to it, and how it is read (numeric as exact text). */
const KIND_SQL: Record<LimitKind, { write: string; read: string }> = {
  count: { write: '::integer', read: '' },
  usd: { write: '::numeric', read: '::text' },
  period: { write: '::text', read: '' },
  models: { write: '::text[]', read: '' },
  date: { write: '::timestamptz', read: '' },
};

/** The `SET a = $2, b = $3` of the settings given (absent ones left as they are), and their values. */
function assignments(s: LimitSettings, first: number): { sql: string[]; values: unknown[] } {
  const sql: string[] = [];
  const values: unknown[] = [];
  for (const d of LIMIT_SETTINGS as readonly LimitDescriptor[]) {
    const v: unknown = s[d.field as keyof LimitSettings];
    if (v === undefined) continue;
    values.push(v);
    sql.push(`${d.column} = $${first + values.length - 1}${KIND_SQL[d.kind].write}`);
  }
  return { sql, values };
}

/** Writes a key's settings; false when no key has that id. */
export async function updateKeySettings(db: Queryable, id: string, s: LimitSettings): Promise<boolean> {
  checkSettings(s, { forKey: true });
  if (!isUuid(id)) return false;
  const { sql, values } = assignments(s, 2);
  if (sql.length === 0) return (await db.query('SELECT 1 FROM api_keys WHERE id = $1', [id])).length > 0;
  const rows = await db.query(`UPDATE api_keys SET ${sql.join(', ')} WHERE id = $1 RETURNING id`, [id, ...values]);
  return rows.length > 0;
}

/** Writes an owner's defaults (the owner must exist); false when it does not. */
export async function updateOwnerLimits(db: Queryable, owner: string, s: LimitSettings): Promise<boolean> {
  checkSettings(s, { forKey: false });
  const { sql, values } = assignments(s, 2);
  const rows = await db.query(
    `WITH o AS (SELECT name FROM owners WHERE name = $1),
     ins AS (INSERT INTO owner_limits (owner) SELECT name FROM o ON CONFLICT (owner) DO NOTHING)
     SELECT name FROM o`,
    [owner],
  );
  if (rows.length === 0) return false;
  if (sql.length > 0)
    await db.query(`UPDATE owner_limits SET ${sql.join(', ')}, updated_at = now() WHERE owner = $1`, [
      owner,
      ...values,
    ]);
  return true;
}

interface ViewRow extends LimitColumns, OwnerLimitColumns {
  id: string;
  owner: string;
  prefix: string;
  created_at: Date;
  revoked_at: Date | null;
  expires_at: Date | null;
}

/** The settings columns of `table` (numeric as exact text), `prefix`ed. */
export function limitColumns(table: string, prefix = ''): string {
  return OWNER_SETTINGS.map((d) => `${table}.${d.column}${KIND_SQL[d.kind].read} AS ${prefix}${d.column}`).join(', ');
}

const OWNER_COLUMNS = limitColumns('ol', 'o_');
const KEY_COLUMNS = limitColumns('k');

/** Keys with their settings: one key by id, or every key of `owner` (both: that key, if it is the owner's). */
export async function keyViews(db: Queryable, o: { owner?: string; id?: string }): Promise<KeyView[]> {
  if (o.id !== undefined && !isUuid(o.id)) return [];
  const rows = await db.query<ViewRow>(
    `SELECT k.id, k.owner, k.prefix, k.created_at, k.revoked_at, k.expires_at, ${KEY_COLUMNS}, ${OWNER_COLUMNS}
     FROM api_keys k LEFT JOIN owner_limits ol ON ol.owner = k.owner
     WHERE ($1::text IS NULL OR k.owner = $1) AND ($2::uuid IS NULL OR k.id = $2::uuid)
     ORDER BY k.created_at, k.id`,
    [o.owner ?? null, o.id ?? null],
  );
  return rows.map((r) => {
    const owner = ownerColumns(r);
    return {
      id: r.id,
      owner: r.owner,
      prefix: r.prefix,
      createdAt: new Date(r.created_at),
      revokedAt: r.revoked_at ? new Date(r.revoked_at) : null,
      expiresAt: r.expires_at ? new Date(r.expires_at) : null,
      settings: settingsOf(r),
      ownerDefaults: settingsOf(owner),
      limits: effectiveLimits(r, owner),
    };
  });
}

/** One key of `owner` (NotFoundError for another owner's or an unknown id). */
export async function keyView(db: Queryable, owner: string, id: string): Promise<KeyView> {
  const [view] = await keyViews(db, { owner, id });
  if (!view) throw new NotFoundError();
  return view;
}

/** The owner's defaults of a row that selected them with the `o_` prefix. */
export function ownerColumns(r: OwnerLimitColumns): LimitColumns {
  return Object.fromEntries(LIMIT_COLUMNS.map((c) => [c, r[`o_${c}`]])) as LimitColumns;
}

/** The owner's defaults of such a row; null when it sets none. */
export function ownerDefaultsOf(r: OwnerLimitColumns): LimitColumns | null {
  return LIMIT_COLUMNS.every((c) => r[`o_${c}`] === null) ? null : ownerColumns(r);
}
