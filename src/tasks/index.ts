export { TaskStore, CHANNEL_CANCEL, CHANNEL_WORK, type TaskAdmission, type TaskKey } from './store.ts';
export { Queue, type QueueOptions } from './queue.ts';
export { Worker, type WorkerOptions } from './worker.ts';
export type { TaskRow } from './model.ts';
export {
  checkedHandler,
  PHASES,
  SPLIT,
  type JobContext,
  type JobHandler,
  type Phase,
  type PieceSpec,
  type PieceState,
} from './types.ts';
export {
  TASK_EVENT_NAMES,
  TASK_EVENTS_CHANNEL,
  taskOfEvent,
  type TaskEventName,
  type TaskEventRow,
  type TaskRowJson,
} from './events.ts';
export { FINAL_PHASES, type FollowOptions } from './follow.ts';
export {
  ASSET_TASK_TYPES,
  CLIENT_TASK_TYPES,
  ENCODING_TASK_TYPES,
  isClientTaskType,
  TASK_TYPES,
  type ClientTaskType,
} from './task-types.ts';
