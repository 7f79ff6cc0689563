// Engine registry: one line per kind. Each engine takes its own options (issue #26: narrow
// option types, never the whole Config; main.ts maps the settings to them).

import type { Logger } from 'pino';
import type { Engine } from '../engine.ts';
import type { Tuning } from '../tuning.ts';
import { type LlamaCppOptions, LlamaCppEngine } from './llamacpp/index.ts';
import { VllmEngine, type VllmOptions } from './vllm/index.ts';

/** What every engine is given: its models and the tuning variables. */
type Common = 'modelsDir' | 'tuning' | 'log';

export interface EngineOptions {
  kind: 'llama.cpp' | 'vllm';
  modelsDir: string;
  /** MEDIAPLANE_ORCHESTRATOR_MODELS: llama.cpp's warm models, vLLM's one model. */
  models: readonly string[];
  tuning: Tuning;
  llamaCpp: Omit<LlamaCppOptions, Common | 'warmModels'>;
  vllm: Omit<VllmOptions, Common | 'models'>;
}

const engines: Record<EngineOptions['kind'], (o: EngineOptions, log: Logger) => Engine> = {
  'llama.cpp': (o, log) =>
    new LlamaCppEngine({ ...o.llamaCpp, modelsDir: o.modelsDir, warmModels: o.models, tuning: o.tuning, log }),
  vllm: (o, log) => new VllmEngine({ ...o.vllm, modelsDir: o.modelsDir, models: o.models, tuning: o.tuning, log }),
};

export function createEngine(options: EngineOptions, log: Logger): Engine {
  return engines[options.kind](options, log);
}
