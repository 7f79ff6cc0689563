import { InternalError } from '../../lib/errors.ts';
import { type ClientTaskType, isClientTaskType, type TaskRow } from '../../tasks/index.ts';
import type { PublicBase } from '../public-base.ts';
import { wireTask, type TaskWireShape, type WireTask } from './task.ts';
import { TRANSCODE_TASK_TYPE, transcodeTaskWire } from './transcode.ts';
import { CLIP_TASK_TYPE, clipTaskWire } from './clip-task.ts';
import { UPLOAD_TASK_TYPE, uploadTaskWire } from './upload-task.ts';
import { EXPORT_DATA_TASK_TYPE, EXPORT_TASK_TYPE, exportDataTaskWire, exportTaskWire } from './export-task.ts';

// The wire contracts of the task API, one file per task type (issue #16): a new task type
// is a name in the registry (tasks/task-types.ts), a new handler (given to the worker in
// main.ts) and a new contract file, listed here.

export { PLAYABLE_AT, TaskPieces, wirePieces, type TaskWireShape, type WirePieces, type WireTask } from './task.ts';
export {
  redactParams,
  TranscodeRequest,
  transcodeTask,
  TRANSCODE_TASK_TYPE,
  type RedactedParams,
  type TranscodeParams,
} from './transcode.ts';

/** The task types this API creates (tasks/task-types.ts), each with its wire shape: a type registered there has one here, or tsc says so. */
const WIRE_SHAPES: Readonly<Record<ClientTaskType, TaskWireShape>> = {
  [TRANSCODE_TASK_TYPE]: transcodeTaskWire,
  [UPLOAD_TASK_TYPE]: uploadTaskWire,
  [CLIP_TASK_TYPE]: clipTaskWire,
  [EXPORT_TASK_TYPE]: exportTaskWire,
  [EXPORT_DATA_TASK_TYPE]: exportDataTaskWire,
};

/** The Task of spec/API.md for a stored row, in the shape of its type. */
export function toWireTask(row: TaskRow, base: PublicBase): WireTask {
  const shape = isClientTaskType(row.type) ? WIRE_SHAPES[row.type] : undefined;
  // Only this API creates tasks, and only of the types above.
  if (!shape) throw new InternalError(`no wire shape for task type ${row.type}`);
  return wireTask(row, shape, base);
}
