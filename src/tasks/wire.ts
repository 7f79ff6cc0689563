import { redactParams, type RedactedParams, type TranscodeParams } from '../transcode/index.ts';
import { ms, type TaskRow } from './model.ts';
import type { Phase } from './types.ts';

/** The Task as the spec puts it on the wire (spec/API.md "The Task"). */
export interface WireTask {
  id: string;
  type: string;
  createdAt: number;
  scheduledAt?: number;
  projectId: string;
  requesterId?: string;
  params: {
    outputs: RedactedParams['outputs'];
    'transcode-file': RedactedParams;
  };
  status: { phase: Phase; updatedAt: number; progress?: number; errorMessage?: string; retries?: number };
  output?: { transcodeFile: Record<string, unknown> };
}

/**
 * A signed input URL carries its signature in the query (`?X-Amz-Signature=...`), a
 * credential like the S3 keys (issue #15): the Task shows the URL without query or fragment,
 * in every phase, as a completed task's row keeps it (model.ts PARAMS_WITHOUT_SECRETS).
 */
function hideInputQuery(p: RedactedParams): RedactedParams {
  if (!('url' in p.input)) return p;
  return { ...p, input: { ...p.input, url: p.input.url.replace(/[?#].*$/s, '') } };
}

// `pending` is the state between insert and enqueue; both happen in one statement here, so
// a client only ever sees it if a future task type splits them.
export function toWireTask(row: TaskRow): WireTask {
  // Validated on the way in (api/), so the stored params have the request's shape.
  const params = hideInputQuery(redactParams(row.params as TranscodeParams));
  const status: WireTask['status'] = { phase: row.phase, updatedAt: ms(row.updated_at) ?? 0 };
  if (row.progress !== null) status.progress = row.progress;
  if (row.error_message !== null) status.errorMessage = row.error_message;
  if (row.retries > 0) status.retries = row.retries;
  const task: WireTask = {
    id: row.id,
    type: row.type,
    createdAt: ms(row.created_at) ?? 0,
    projectId: row.project_id,
    params: { outputs: params.outputs, 'transcode-file': params },
    status,
  };
  const scheduledAt = ms(row.scheduled_at);
  if (scheduledAt !== undefined) task.scheduledAt = scheduledAt;
  if (row.requester_id !== null) task.requesterId = row.requester_id;
  if (row.output !== null) task.output = { transcodeFile: row.output };
  return task;
}
