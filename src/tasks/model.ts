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
  retries: number;
  output: Record<string, unknown> | null;
  attempts: number;
}

/** Columns of TaskRow, for SELECT and RETURNING lists. */
export const TASK_COLUMNS =
  'id, owner, project_id, type, phase, params, requester_id, created_at, scheduled_at, updated_at, progress, error_message, retries, output, attempts';

/**
 * `params` without what is secret in them, for a task that can no longer run (issue #15): the
 * credentials (kept under `credentials` keys, spec/API.md) and the input URL's query string,
 * where a signed URL carries its signature (`?X-Amz-Signature=...`); its fragment goes too.
 * The wire Task hides the same query string in every phase (wire.ts).
 */
export const PARAMS_WITHOUT_SECRETS = `(CASE WHEN jsonb_typeof(params #> '{input,url}') = 'string'
    THEN jsonb_set(params, '{input,url}', to_jsonb(regexp_replace(params #>> '{input,url}', '[?#].*$', '')))
    ELSE params END) #- '{input,credentials}' #- '{storage,credentials}'`;

/** The phases from which a task may be cancelled, and from which it may be retried. */
export const CANCELLABLE: readonly Phase[] = ['pending', 'waiting', 'running'];
export const RETRYABLE: readonly Phase[] = ['failed', 'cancelled'];

export const ms = (d: Date | string | null): number | undefined => (d === null ? undefined : new Date(d).getTime());
