// Keyset paging of a list (Livepeer's lists page by cursor): a store asks for one row more
// than the page holds; that row's presence says there is a next page, whose cursor is the
// last id of this one.

/** A page from `limit + 1` rows: the first `limit`, and the cursor of the next page (null: none). */
export function paged<T extends { id: string }>(rows: T[], limit: number): { items: T[]; next: string | null } {
  const more = rows.length > limit;
  const items = more ? rows.slice(0, limit) : rows;
  return { items, next: more ? (items.at(-1)?.id ?? null) : null };
}

/**
 * The condition of a page after `cursor` (the SQL parameter holding the previous page's last
 * id, NULL for the first page): rows older than the cursor's, whose (created_at, id) is read
 * from `table` within `scope` (the list's owner), so a cursor of another scope starts nothing.
 * (created_at, id) orders ties exactly; the list is ordered by NEWEST_FIRST.
 */
export const olderThanCursor = (p: { table: string; cursor: string; scope: string }): string =>
  `(${p.cursor}::uuid IS NULL OR (created_at, id) < (SELECT created_at, id FROM ${p.table} WHERE id = ${p.cursor} AND ${p.scope}))`;

export const NEWEST_FIRST = 'ORDER BY created_at DESC, id DESC';
