// The llama.cpp engine's public face (issue #26: an engine is a folder). The JSON Schema to
// grammar functions are exported for their tests and the stall benchmark.

export { type LlamaCppOptions, LlamaCppEngine } from './engine.ts';
export {
  createJsonGrammar,
  patchGrammar,
  responseFormatSchema,
  tokensOutsideUtf8,
  toolCallSchema,
  toolCallSchemas,
} from './json-schema/index.ts';
