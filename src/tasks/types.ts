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
  /** Issue #30: splits this task into pieces and hands its slot back; return what it resolves to. */
  split?(pieces: readonly PieceSpec[]): Promise<typeof SPLIT>;
  /** Issue #30: set for a piece: its parent task's id. */
  parentId?: string;
  /** Issue #30: for a piece, every piece of its parent. */
  siblings?(): Promise<PieceState[]>;
  /**
   * For a piece: its parent's early outputs now hold every rendition and the audio, so its
   * playlists play before the last piece ends. The parent keeps the first such time.
   */
  playable?(): Promise<void>;
}

/** Issue #30: one piece of a task split by its handler (a child row of `tasks`). */
export interface PieceSpec {
  /** A task type with a handler: 'transcode-chunk', ... */
  type: string;
  params: Record<string, unknown>;
  /** What messages and the pieces view call it: "video 60.0-90.0 s (chunk 3 of 7)". */
  label: string;
  /** Its share of the parent's progress. */
  weight: number;
  /** Runs only once every other piece has completed (the stitch); its output becomes the parent's. */
  last?: boolean;
}

/** Issue #30: a piece as its siblings see it. */
export interface PieceState {
  id: string;
  type: string;
  label: string;
  phase: Phase;
  progress: number | null;
  output: Record<string, unknown> | null;
  worker: string | null;
  runs: number;
  error: string | null;
}

/** What a handler returns after ctx.split(): the run ends without completing its task. */
export const SPLIT: unique symbol = Symbol('split');

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
