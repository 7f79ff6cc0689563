import type { Logger } from 'pino';

export const PHASES = ['pending', 'waiting', 'running', 'completed', 'failed', 'cancelled'] as const;
export type Phase = (typeof PHASES)[number];

/** What a job handler gets besides its params. */
export interface JobContext {
  taskId: string;
  /** 1 for the first run, 2 for the first retry, ... */
  attempt: number;
  /** Aborted on cancel, on a lost lease and at shutdown; pass it to every child process and request. */
  signal: AbortSignal;
  /** An empty directory for this run; the worker removes it when the run ends, whatever the outcome. */
  scratchDir: string;
  /** Reports progress 0..1; the worker writes it at most about once a second. */
  progress(fraction: number): void;
  log: Logger;
}

/**
 * Runs one job. Throw a MediaplaneError (lib/errors.ts) to fail: `retryable` decides whether
 * the task goes back to `waiting`. The resolved value becomes the task's `output`.
 */
export type JobHandler<P = unknown, O = unknown> = (params: P, ctx: JobContext) => Promise<O>;

/**
 * Widens a typed handler for the worker's registry. The params were validated against the
 * task type's schema when the task was created, so the stored JSON has the handler's shape.
 */
export function anyHandler<P, O>(h: JobHandler<P, O>): JobHandler {
  return h as JobHandler;
}
