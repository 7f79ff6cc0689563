import { InternalError } from '../lib/errors.ts';
import type { TranscodeFileOutput } from './types.ts';

// A job's finish step: what its outputs become once every one of them is written, run once
// by whichever run wrote the last of them (the single run, or a chunked run's stitch). A
// transcode has none (its output is the TranscodeFileOutput); an asset's (assets/) turns it
// into the AssetOutput its task keeps. Steps are named by kind, so a chunked job's stitch,
// which may run on another worker, finds the same step from the kind in its params.

/** A finish step as a job names it: its kind and its params (plain JSON, stored with the pieces). */
export interface JobFinish {
  kind: string;
  params: Record<string, unknown>;
}

/** Makes the task's output of the job's outputs; `params` are what the job entry's prepare step gave. */
export type FinishStep = (o: {
  output: TranscodeFileOutput;
  params: Record<string, unknown>;
  signal: AbortSignal;
}) => Promise<Record<string, unknown>>;

export type FinishSteps = Readonly<Record<string, FinishStep>>;

/** The task's output: the job's outputs as they are, or as its finish step makes them. */
export async function finishJob(
  steps: FinishSteps | undefined,
  finish: JobFinish | undefined,
  o: { output: TranscodeFileOutput; signal: AbortSignal },
): Promise<Record<string, unknown>> {
  if (!finish) return o.output;
  const step = steps?.[finish.kind];
  if (!step) throw new InternalError(`no finish step "${finish.kind}" on this worker`);
  return step({ output: o.output, params: finish.params, signal: o.signal });
}
