import type { Static, TSchema } from '@sinclair/typebox';
import type { Logger } from 'pino';
import { ValidationError } from '../lib/errors.ts';
import { schemaChecker } from '../lib/schema-validator.ts';

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
 * A handler for the worker's registry that checks the task's stored params against its task
 * type's `schema` before it runs (issue #26). They were checked when the task was created, but
 * a row written by another version of the service, or by hand, may no longer fit: such a task
 * fails at once (not retried) with a message naming each field and rule, instead of crashing
 * somewhere inside the handler. The handler gets the params with the schema's type.
 */
export function checkedHandler<S extends TSchema, O>(schema: S, h: JobHandler<Static<S>, O>): JobHandler<unknown, O> {
  const check = schemaChecker()(schema);
  return (params, ctx) => {
    const problem = check(params);
    if (problem)
      return Promise.reject(
        new ValidationError(
          `the task's stored params do not fit its type (written by another version of the service?): ${problem.message}`,
        ),
      );
    // The schema's check just passed: the JSON has the schema's type.
    return h(params as Static<S>, ctx);
  };
}
