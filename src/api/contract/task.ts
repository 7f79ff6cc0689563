import { Type, type Static } from '@sinclair/typebox';
import type { PieceState, Phase, TaskRow } from '../../tasks/index.ts';
import type { PublicBase } from '../public-base.ts';

// The Task as the spec puts it on the wire (spec/API.md "The Task"), at the API's edge
// (issue #16): tasks/ stores and runs tasks of any type and knows none of their shapes.

/** The description of `playableAt` on the Task and the Asset (an extension of Livepeer's, which its SDK ignores). */
export const PLAYABLE_AT =
  'ms since the epoch: when its HLS playlists (EVENT, later VOD) first played every rendition and the audio while it was still processing. Absent until then, and for one that was not split into pieces.';

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
  /** Issue #30: a task split into pieces shows them on GET /api/task/{id} (an extension of Livepeer's Task). */
  pieces?: WirePieces;
  /** When its HLS master first played, before the task ended (a split task's early playlists): ms since the epoch. */
  playableAt?: number;
}

/**
 * The pieces of a task split to run on several workers at once (issue #30): how many there
 * are and in which phase, and each in queue order with where it ran last (`worker`) and how
 * many times it was claimed (`runs`: more than 1 after a retry or a worker's crash).
 */
export const TaskPieces = Type.Object(
  {
    total: Type.Integer(),
    completed: Type.Integer(),
    running: Type.Integer(),
    failed: Type.Integer(),
    items: Type.Array(
      Type.Object({
        label: Type.String({ description: 'what the piece is: "video 60.0-90.0 s (chunk 3 of 7)", "audio", "stitch"' }),
        phase: Type.String(),
        progress: Type.Number({ minimum: 0, maximum: 1 }),
        runs: Type.Integer({ description: 'how many times a worker took the piece' }),
        worker: Type.Optional(Type.String({ description: 'the worker that took it last' })),
      }),
    ),
  },
  { description: 'Only on GET /api/task/{id} of a task that was split into pieces' },
);
export type WirePieces = Static<typeof TaskPieces>;

/** The pieces view of a split task; undefined for a task with no pieces. */
export function wirePieces(pieces: readonly PieceState[]): WirePieces | undefined {
  if (pieces.length === 0) return undefined;
  const count = (phase: Phase) => pieces.filter((p) => p.phase === phase).length;
  return {
    total: pieces.length,
    completed: count('completed'),
    running: count('running'),
    failed: count('failed'),
    items: pieces.map((p) => ({
      label: p.label,
      phase: p.phase,
      progress: p.phase === 'completed' ? 1 : (p.progress ?? 0),
      runs: p.runs,
      ...(p.worker === null ? {} : { worker: p.worker }),
    })),
  };
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
  const playableAt = ms(row.playable_at);
  if (playableAt !== undefined) task.playableAt = playableAt;
  return task;
}
