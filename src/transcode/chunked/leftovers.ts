import type { BuiltinStore } from '../../storage/builtin/index.ts';
import type { TaskStore } from '../../tasks/index.ts';
import { piecesPrefix } from './types.ts';

// Issue #30: the stitch removes `pieces/<parentId>/` when a chunked task completes; a task that
// failed or was cancelled leaves its chunks' MP4 parts (and a copied source) there. A retry's
// split clears them first; otherwise the retention sweep removes them a while after the end.

/** How long after its end a split task's pieces are kept: a retry soon after needs none of them. */
export const ENDED_PIECES_KEPT_MS = 10 * 60_000;

/** Removes the pieces' files of up to `limit` ended split tasks; how many it removed. */
export async function removeEndedPieces(
  d: { tasks: TaskStore; store: BuiltinStore },
  o: { limit: number; olderThanMs?: number },
): Promise<number> {
  const ids = await d.tasks.endedSplits({ olderThanMs: o.olderThanMs ?? ENDED_PIECES_KEPT_MS, limit: o.limit });
  for (const id of ids) await d.store.removePrefix(piecesPrefix(id));
  await d.tasks.forgetSplits(ids);
  return ids.length;
}
