// Keyset paging of a list (Livepeer's lists page by cursor): a store asks for one row more
// than the page holds; that row's presence says there is a next page, whose cursor is the
// last id of this one.

/** A page from `limit + 1` rows: the first `limit`, and the cursor of the next page (null: none). */
export function paged<T extends { id: string }>(rows: T[], limit: number): { items: T[]; next: string | null } {
  const more = rows.length > limit;
  const items = more ? rows.slice(0, limit) : rows;
  return { items, next: more ? (items.at(-1)?.id ?? null) : null };
}
