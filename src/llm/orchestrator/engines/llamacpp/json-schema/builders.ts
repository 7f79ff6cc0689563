// The public schema builders: the grammar schema of a response_format and of tool calls.

import type { GbnfJsonSchema } from 'node-llama-cpp';
import { InternalError, ValidationError } from '../../../../../lib/errors.ts';
import type { ResponseFormat, ToolChoice, ToolDef } from '../../../../protocol/types.ts';
import { shapeOf } from './convert.ts';
import { type Doc, newBudget, newDoc, problem, throwProblems } from './doc.ts';
import { bounded } from './gbnf-schema.ts';
import { ANNOTATIONS } from './keywords.ts';
import { jsonTypes } from './overlap.ts';
import { isObject, oneOrUnion, type Shape } from './shape.ts';
import { checkAlternatives } from './worst-case.ts';

/**
 * The grammar schema for a response_format (json_object or json_schema): the caller's schema
 * checked (a ValidationError naming the first keyword the engine cannot enforce by its path,
 * every one in its details) and bounded so that any document it allows fits maxTokens tokens
 * (else a ValidationError naming max_tokens with the least that would do).
 */
export function responseFormatSchema(format: ResponseFormat, maxTokens: number): GbnfJsonSchema {
  if (format.type === 'json_object')
    return bounded({ kind: 'object', props: [], extra: { kind: 'any' }, min: 0, max: undefined }, maxTokens);
  const doc = newDoc(format.json_schema.schema ?? {}, {
    param: 'response_format.json_schema.schema',
    prefix: 'd',
    budget: newBudget(),
  });
  const root = shapeOf(doc, doc.root, []);
  checkAlternatives(doc, root);
  throwProblems([doc]);
  return bounded(root, maxTokens);
}

/**
 * The grammar schema of one forced tool call, `{"name": <the name>, "arguments": <its
 * parameters>}`: for a named function, that one; for `required`, any of the tools (oneOf). The
 * parameters are checked as responseFormatSchema checks a schema (params
 * `tools[i].function.parameters...`), and the whole call bounded to maxTokens.
 */
export function toolCallSchema(
  tools: ToolDef[],
  choice: Exclude<ToolChoice, 'auto'>,
  maxTokens: number,
): GbnfJsonSchema {
  const chosen = tools
    .map((t, i) => ({ t, i }))
    .filter(({ t }) => choice === 'required' || t.function.name === choice.function.name);
  if (chosen.length === 0)
    throw new ValidationError(
      choice === 'required'
        ? 'tools: tool_choice "required" needs at least one tool'
        : `tool_choice: names the function ${JSON.stringify(choice.function.name)}, which is not in tools`,
      { param: choice === 'required' ? 'tools' : 'tool_choice' },
    );
  return bounded(oneOrUnion(callShapes(chosen)), maxTokens);
}

/**
 * The grammar schema of a call of each tool the model may call (tool_choice "auto"), in the
 * order of `tools`, each bounded by the first of `budgets` that one call fits (else the last
 * one's refusal). The tools are converted together, as one request's schemas (MAX_NODES).
 */
export function toolCallSchemas(tools: ToolDef[], budgets: number[]): GbnfJsonSchema[] {
  return callShapes(tools.map((t, i) => ({ t, i }))).map((call) => {
    for (const [i, budget] of budgets.entries()) {
      try {
        return bounded(call, budget);
      } catch (err) {
        if (!(err instanceof ValidationError && err.param === 'max_tokens') || i === budgets.length - 1) throw err;
      }
    }
    throw new InternalError('toolCallSchemas: no budget');
  });
}

/** `{"name": <the name>, "arguments": <its parameters>}` of each tool, checked (a ValidationError). */
function callShapes(chosen: Array<{ t: ToolDef; i: number }>): Shape[] {
  const budget = newBudget();
  const docs: Doc[] = [];
  const calls = chosen.map(({ t, i }): Shape => {
    const param = `tools[${i}].function.parameters`;
    const doc = newDoc(t.function.parameters ?? NO_PARAMETERS, { param, prefix: `t${i}_`, budget });
    docs.push(doc);
    const args = argumentsShape(doc);
    checkAlternatives(doc, args);
    return {
      kind: 'object',
      props: [
        ['name', { kind: 'literal', value: t.function.name }],
        ['arguments', args],
      ],
      extra: undefined,
      min: 2,
      max: 2,
    };
  });
  throwProblems(docs);
  checkUniqueNames(chosen.map(({ t, i }) => ({ name: t.function.name, i })));
  return calls;
}

/** OpenAI: "omitting parameters defines a function with an empty parameter list". */
const NO_PARAMETERS = { type: 'object', properties: {}, additionalProperties: false };

/** Function arguments are a JSON object (OpenAI): parameters without a type describe one. */
function argumentsShape(doc: Doc): Shape {
  const params = doc.root;
  if (isObject(params) && params.type === undefined && Object.keys(params).every((k) => ANNOTATIONS.has(k)))
    return shapeOf(doc, { ...params, type: 'object' }, []);
  const shape = shapeOf(doc, params, []);
  const types = jsonTypes(shape);
  if (doc.problems.length === 0 && (types.size !== 1 || !types.has('object')))
    problem(doc, ['type'], 'must describe an object: function arguments are a JSON object');
  return shape;
}

function checkUniqueNames(tools: Array<{ name: string; i: number }>): void {
  const seen = new Set<string>();
  for (const { name, i } of tools) {
    if (seen.has(name))
      throw new ValidationError(`tools[${i}].function.name: ${JSON.stringify(name)} names two tools`, {
        param: `tools[${i}].function.name`,
      });
    seen.add(name);
  }
}
