import type { Phase } from './types.ts';

/** A task as stored: one row of `tasks` (credentials still inside `params`). */
export interface TaskRow {
  id: string;
  owner: string;
  project_id: string;
  type: string;
  phase: Phase;
  params: Record<string, unknown>;
  requester_id: string | null;
  created_at: Date;
  scheduled_at: Date | null;
  updated_at: Date;
  progress: number | null;
  error_message: string | null;
  /** Every automatic rerun so far: failures retried and crashes (lease expiries) taken back. */
  retries: number;
  /** The reruns that a lease expiry caused (a worker killed or cut off); `retries - crashes` were failures. */
  crashes: number;
  output: Record<string, unknown> | null;
  attempts: number;
  /** Issue #30: set for a piece (pieces.ts): its parent task. A piece is never a task to the API. */
  parent_id: string | null;
  /** When a split task's early outputs first held every rendition and the audio (pieces.ts markPlayable). */
  playable_at: Date | null;
}

/** Columns of TaskRow, for SELECT and RETURNING lists. */
export const TASK_COLUMNS =
  'id, owner, project_id, type, phase, params, requester_id, created_at, scheduled_at, updated_at, progress, error_message, retries, crashes, output, attempts, parent_id, playable_at';

/**
 * `params` without what is secret in them, for a task that can no longer run (issue #15).
 * Every task type keeps its secrets where spec/API.md puts them, one level down: under
 * `credentials` keys, and in the query of a `url` (a signed URL carries its signature there,
 * `?X-Amz-Signature=...`; its fragment goes too). The rule names no field of any one type, so
 * a new task type needs no change here (issue #16). Each API hides the same query string in
 * every phase (for transcoding: api/contract/transcode.ts).
 */
export const PARAMS_WITHOUT_SECRETS = `COALESCE((SELECT jsonb_object_agg(member.key, CASE
      WHEN jsonb_typeof(member.value) <> 'object' THEN member.value
      WHEN jsonb_typeof(member.value -> 'url') = 'string' THEN jsonb_set(member.value - 'credentials', '{url}',
        to_jsonb(regexp_replace(member.value ->> 'url', '[?#].*$', '')))
      ELSE member.value - 'credentials' END)
    FROM jsonb_each(params) AS member), params)`;

/** The phases from which a task may be cancelled, and from which it may be retried. */
export const CANCELLABLE: readonly Phase[] = ['pending', 'waiting', 'running'];
export const RETRYABLE: readonly Phase[] = ['failed', 'cancelled'];
