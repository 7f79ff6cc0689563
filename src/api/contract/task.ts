import type { Phase, TaskRow } from '../../tasks/index.ts';
import type { PublicBase } from '../public-base.ts';

// The Task as the spec puts it on the wire (spec/API.md "The Task"), at the API's edge
// (issue #16): tasks/ stores and runs tasks of any type and knows none of their shapes.

/** How one task type shows its stored params and its output; one per contract file. */
export interface TaskWireShape {
  /** The Task's `params`, with no secret left in them. */
  params(stored: Record<string, unknown>): Record<string, unknown>;
  /**
   * The Task's `output`, from what the task's handler returned; `base` makes absolute URLs
   * of what the built-in store holds (spec/API.md section C).
   */
  output(stored: Record<string, unknown>, task: TaskRow, base: PublicBase): Record<string, unknown>;
  /** The Task's `inputAssetId` and `outputAssetId`, for a type that reads or makes assets (Livepeer's Task). */
  assets?(stored: Record<string, unknown>): { inputAssetId?: string; outputAssetId?: string };
}

export interface WireTask {
  id: string;
  type: string;
  createdAt: number;
  scheduledAt?: number;
  projectId: string;
  requesterId?: string;
  inputAssetId?: string;
  outputAssetId?: string;
  params: Record<string, unknown>;
  status: { phase: Phase; updatedAt: number; progress?: number; errorMessage?: string; retries?: number };
  output?: Record<string, unknown>;
}

const ms = (d: Date | string | null): number | undefined => (d === null ? undefined : new Date(d).getTime());

// `pending` is the state between insert and enqueue; both happen in one statement here, so
// a client only ever sees it if a future task type splits them.
export function wireTask(row: TaskRow, shape: TaskWireShape, base: PublicBase): WireTask {
  const status: WireTask['status'] = { phase: row.phase, updatedAt: ms(row.updated_at) ?? 0 };
  if (row.progress !== null) status.progress = row.progress;
  if (row.error_message !== null) status.errorMessage = row.error_message;
  if (row.retries > 0) status.retries = row.retries;
  const task: WireTask = {
    id: row.id,
    type: row.type,
    createdAt: ms(row.created_at) ?? 0,
    projectId: row.project_id,
    params: shape.params(row.params),
    status,
  };
  const scheduledAt = ms(row.scheduled_at);
  if (scheduledAt !== undefined) task.scheduledAt = scheduledAt;
  if (row.requester_id !== null) task.requesterId = row.requester_id;
  if (shape.assets) Object.assign(task, shape.assets(row.params));
  if (row.output !== null) task.output = shape.output(row.output, row, base);
  return task;
}
