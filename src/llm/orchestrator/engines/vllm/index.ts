// The vLLM engine's public face (issue #26: an engine is a folder).

export { VllmEngine, type VllmOptions } from './engine.ts';
export { vllmArgs } from './process.ts';
