export { TaskStore, CHANNEL_CANCEL, CHANNEL_WORK } from './store.ts';
export { Queue } from './queue.ts';
export { Worker, type WorkerOptions } from './worker.ts';
export type { TaskRow } from './model.ts';
export { anyHandler, PHASES, type JobContext, type JobHandler, type Phase } from './types.ts';
