// Engine registry: one line per kind.

import type { Logger } from 'pino';
import type { Config } from '../../../config/index.ts';
import type { Engine } from '../engine.ts';
import { tuningFromConfig } from '../tuning.ts';
import { LlamaCppEngine } from './llamacpp.ts';
import { VllmEngine } from './vllm.ts';

const engines: Record<Config['orchestratorEngine'], (config: Config, log: Logger) => Engine> = {
  'llama.cpp': (config, log) =>
    new LlamaCppEngine({
      modelsDir: config.modelsDir,
      warmModels: config.orchestratorModels,
      tuning: tuningFromConfig(config),
      threads: config.llmThreads,
      gpu: config.llmGpu,
      quantization: config.llmQuantization,
      hubUrl: config.modelHubUrl,
      log,
    }),
  vllm: (config, log) =>
    new VllmEngine({
      modelsDir: config.modelsDir,
      models: config.orchestratorModels,
      tuning: tuningFromConfig(config),
      url: config.vllmUrl,
      command: config.vllmCommand,
      startTimeoutMs: config.vllmStartTimeoutMs,
      log,
    }),
};

export function createEngine(config: Config, log: Logger): Engine {
  return engines[config.orchestratorEngine](config, log);
}
