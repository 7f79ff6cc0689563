// The settings of bench/llm.ts, read once from the environment (BENCH_*, and the service's own
// MEDIAPLANE_LLM_THREADS and MEDIAPLANE_ORCHESTRATOR_STREAM_INTERVAL_MS): the model, the
// request every leg sends, and how many runs, processes and streams each leg has.
import { join } from 'node:path';
import { loadConfig } from '../src/config/index.ts';
import { MODELS_DIR, TINY } from '../test/helpers/llm.ts';

export const MODEL = process.env.BENCH_MODEL ?? TINY;
export const FILE = process.env.BENCH_MODEL_FILE ?? join(MODELS_DIR, TINY, 'llama-2-tiny-random.gguf');
export const MAX_TOKENS = Number(process.env.BENCH_MAX_TOKENS ?? 400);
export const RUNS = Number(process.env.BENCH_RUNS ?? 30);
export const PROCESSES = Number(process.env.BENCH_PROCESSES ?? 3);
export const THREADS = Number(process.env.MEDIAPLANE_LLM_THREADS ?? 1);
export const MAX_NUM_SEQS = Number(process.env.BENCH_MAX_NUM_SEQS ?? 8);
// Concurrent streams for the aggregate figures; empty to leave them out.
export const STREAMS = (process.env.BENCH_STREAMS ?? '1,4,8').split(',').filter(Boolean).map(Number);
// The orchestrator's SSE pacing: MEDIAPLANE_ORCHESTRATOR_STREAM_INTERVAL_MS when set (0: one
// write per token), else the service's default, so the bench measures what users run.
export const STREAM_INTERVAL_MS = loadConfig({
  env: { MEDIAPLANE_ORCHESTRATOR_STREAM_INTERVAL_MS: process.env.MEDIAPLANE_ORCHESTRATOR_STREAM_INTERVAL_MS },
}).orchestratorStreamIntervalMs;
export const PROMPT = 'Tell me a long story about a llama.';
export const STRUCTURED_ROUNDS = Number(process.env.BENCH_STRUCTURED_ROUNDS ?? 10);
// Leg 6's models. A grammar costs a pass over the whole vocabulary for each token whose first
// sample it rejects: tiny-random-llama-2's first sample is almost never valid JSON (32,000
// tokens a pass), stories260K's often is not either, but its pass is over 512 tokens.
export const STRUCTURED_MODELS = (process.env.BENCH_STRUCTURED_MODELS ?? `${MODEL},karpathy/stories260K`)
  .split(',')
  .filter(Boolean);
// A strict-mode schema as an app sends it: every field required, no others.
export const SCHEMA: Record<string, unknown> = process.env.BENCH_SCHEMA
  ? JSON.parse(process.env.BENCH_SCHEMA)
  : {
      type: 'object',
      properties: {
        title: { type: 'string' },
        year: { type: 'integer' },
        tags: { type: 'array', items: { type: 'string' } },
        sequel: { anyOf: [{ type: 'string' }, { type: 'null' }] },
      },
      required: ['title', 'year', 'tags', 'sequel'],
      additionalProperties: false,
    };
// The orchestrator's context per sequence: MAX_MODEL_LEN left at its default follows the model.
export const DEFAULT_MAX_MODEL_LEN = 8192;
