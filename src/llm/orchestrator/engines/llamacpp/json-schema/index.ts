// Structured output on the llama.cpp engine (issue #17): the caller's JSON Schema (response_format
// json_schema, json_object, or a forced tool call) as the schema of node-llama-cpp's JSON grammar,
// such that the output ALWAYS parses and matches, even from a random-weights model.
//
// Four hazards shape this module:
// 1. node-llama-cpp's grammar enforces only some keywords and silently drops the rest. A keyword
//    it cannot enforce is a 400 naming its path here, never an unconstrained answer.
// 2. A random model never closes a string on its own (a closing quote is one of thousands of
//    allowed tokens), so an unbounded string, array or object runs into max_tokens and is cut off
//    mid-document. Every unbounded size gets a cap computed from max_tokens such that the LONGEST
//    document the grammar allows fits (worst-case.ts); when even the smallest cannot, a 400
//    names max_tokens with the least that would do.
// 3. Some of node-llama-cpp's rules allow text that does not match the schema: integers with an
//    exponent (1e-5), exponents that overflow to Infinity, dates such as 02-31, surrogate pairs
//    written as two escapes (one character to JSON Schema's minLength), and unbounded keys in open
//    objects. createJsonGrammar replaces those rules in the generated GBNF (patchGrammar).
// 4. llama.cpp's grammar decodes UTF-8 leniently, so bytes that are not text pass as characters
//    (see tokensOutsideUtf8): the engine bans those tokens while a grammar is on.
//
// The steps, one file each (issue #26): convert.ts turns a schema into a Shape (shape.ts), with
// keywords.ts, scalars.ts, literals.ts and overlap.ts (oneOf), recording problems and spending
// the request's budget in doc.ts; worst-case.ts measures a Shape; gbnf-schema.ts bounds it into
// node-llama-cpp's schema; builders.ts are the entry points; grammar.ts makes and patches the
// grammar.

export { responseFormatSchema, toolCallSchema, toolCallSchemas } from './builders.ts';
export { createJsonGrammar, patchGrammar, tokensOutsideUtf8 } from './grammar.ts';
