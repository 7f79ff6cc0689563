// The tuning variables (API.md section B, "Orchestrators"): read once from the config (main.ts
// tuningFromConfig) and checked against each model's own metadata before anything is loaded. A
// bad value stops the orchestrator with a message naming the variable and the rule, like a bad
// setting does.

import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { readGgufFileInfo } from 'node-llama-cpp';
import { MediaplaneError } from '../../lib/errors.ts';

export interface Tuning {
  use8bit: boolean;
  pipelineParallelSize: number;
  tensorParallelSize: number;
  maxModelLen: number;
  /** True when MAX_MODEL_LEN was left at its default: the model's own context then caps it. */
  maxModelLenIsDefault: boolean;
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  gpuMemoryUtilization: number;
}

/** What the checks need from a model: read from the GGUF header or a hub config.json. */
export interface ModelMeta {
  architecture: string;
  layers: number;
  attentionHeads: number;
  trainedContext: number;
}

/** Tuning variables the model cannot take: they stop the orchestrator at start-up (the operator's mistake). */
export class TuningError extends MediaplaneError {
  readonly code = 'invalid_tuning';
  readonly statusCode = 500;
  readonly problems: string[];
  constructor(model: string, problems: string[]) {
    super(`invalid tuning variables for ${model}:\n  ${problems.join('\n  ')}`);
    this.problems = problems;
  }
}

function count(v: unknown): number | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'bigint') return Number(v);
  if (Array.isArray(v) && v.length > 0) return count(v[0]); // per-layer arrays: the first layer's value
  return undefined;
}

/** Layers, heads and trained context from a GGUF header (no weights are read). */
export async function readGgufMeta(path: string): Promise<ModelMeta> {
  const info = await readGgufFileInfo(path, { readTensorInfo: false });
  const arch = info.architectureMetadata as Record<string, unknown> & { attention?: Record<string, unknown> };
  const layers = count(arch.block_count);
  const heads = count(arch.attention?.head_count);
  const ctx = count(arch.context_length);
  if (layers === undefined || heads === undefined || ctx === undefined) {
    throw new Error(
      `${path}: GGUF metadata lacks ${[layers === undefined && 'block_count', heads === undefined && 'attention.head_count', ctx === undefined && 'context_length'].filter(Boolean).join(', ')}`,
    );
  }
  return {
    architecture: String(info.metadata.general?.architecture ?? 'unknown'),
    layers,
    attentionHeads: heads,
    trainedContext: ctx,
  };
}

/** The same facts from a hub-style `config.json` (safetensors models served by vLLM). */
export async function readHfConfigMeta(modelFolder: string): Promise<ModelMeta | undefined> {
  const text = await readFile(join(modelFolder, 'config.json'), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const c = JSON.parse(text) as Record<string, unknown>;
  const layers = count(c.num_hidden_layers);
  const heads = count(c.num_attention_heads);
  const ctx = count(c.max_position_embeddings);
  if (layers === undefined || heads === undefined || ctx === undefined) return undefined;
  return {
    architecture: String((c.architectures as unknown[] | undefined)?.[0] ?? c.model_type ?? 'unknown'),
    layers,
    attentionHeads: heads,
    trainedContext: ctx,
  };
}

export async function readModelMeta(file: string): Promise<ModelMeta> {
  if (file.toLowerCase().endsWith('.gguf')) return readGgufMeta(file);
  const meta = await readHfConfigMeta(dirname(file));
  if (!meta) throw new Error(`${file}: no GGUF header or config.json to read the model's layers and heads from`);
  return meta;
}

/** The tuning a model actually runs with: MAX_MODEL_LEN resolved against the model. */
export type EffectiveTuning = Omit<Tuning, 'maxModelLenIsDefault'>;

/**
 * Checks every rule of the spec's table against the model and returns the values to run
 * with; all problems are reported together, each naming the variable.
 */
export function checkTuning(model: string, t: Tuning, meta: ModelMeta): EffectiveTuning {
  const problems: string[] = [];
  if (t.pipelineParallelSize > meta.layers) {
    problems.push(
      `PIPELINE_PARALLEL_SIZE=${t.pipelineParallelSize}: must be <= the model's number of layers (${meta.layers})`,
    );
  }
  if (meta.attentionHeads % t.tensorParallelSize !== 0) {
    problems.push(
      `TENSOR_PARALLEL_SIZE=${t.tensorParallelSize}: must divide the model's number of attention heads (${meta.attentionHeads})`,
    );
  }
  let maxModelLen = t.maxModelLen;
  if (t.maxModelLen > meta.trainedContext) {
    if (t.maxModelLenIsDefault) maxModelLen = meta.trainedContext;
    else
      problems.push(
        `MAX_MODEL_LEN=${t.maxModelLen}: must be <= the model's trained context (${meta.trainedContext} tokens)`,
      );
  }
  if (t.maxNumBatchedTokens < maxModelLen) {
    problems.push(`MAX_NUM_BATCHED_TOKENS=${t.maxNumBatchedTokens}: must be >= MAX_MODEL_LEN (${maxModelLen})`);
  }
  if (!(t.gpuMemoryUtilization > 0 && t.gpuMemoryUtilization <= 1)) {
    problems.push(`GPU_MEMORY_UTILIZATION=${t.gpuMemoryUtilization}: must be > 0 and <= 1`);
  }
  if (problems.length > 0) throw new TuningError(model, problems);
  const { maxModelLenIsDefault: _ignored, ...rest } = t;
  return { ...rest, maxModelLen };
}
