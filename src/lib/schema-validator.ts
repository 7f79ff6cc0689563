import { Ajv, type KeywordDefinition } from 'ajv';
import { ValidationError } from './errors.ts';
import { formatSchemaErrors } from './schema-errors.ts';

// The validator of every route schema (Fastify's validator compiler) and of the schemas
// checked outside a route (the chat body an orchestrator receives). Bodies: unknown properties
// are errors (spec: "no unknown top-level keys"), never stripped; types are never coerced;
// every problem is reported, not just the first. Query strings and path parameters are text,
// so only they are coerced (limit=20). A failure is a ValidationError whose messages name the
// field path and the rule (lib/schema-errors.ts), so every API maps it like any other error.

export interface SchemaValidatorOptions {
  /** Extra ajv keywords (the task API's plain-text rule, api/plain-text.ts). */
  keywords?: KeywordDefinition[];
  /** What each schema becomes before it is compiled (the plain-text rule added at its root). */
  prepare?: (schema: object) => object;
}

/** A checker of one schema: undefined when `data` fits, else the ValidationError to throw. */
export type SchemaCheck = (data: unknown) => ValidationError | undefined;

type HttpPart = 'body' | 'querystring' | 'params' | 'headers';

function ajvFor(coerce: boolean, keywords: KeywordDefinition[]): Ajv {
  return new Ajv({
    removeAdditional: false,
    coerceTypes: coerce,
    useDefaults: coerce,
    allErrors: true,
    // The value that broke a rule, for messages that quote it (`(got 3)`).
    verbose: true,
    strict: false,
    keywords,
  });
}

/** Compiles schemas to checkers; `httpPart` says which part of a request (and so the coercion). */
export function schemaChecker(opts: SchemaValidatorOptions = {}) {
  const keywords = opts.keywords ?? [];
  const strict = ajvFor(false, keywords);
  const coercing = ajvFor(true, keywords);
  return (schema: object, httpPart: HttpPart = 'body'): SchemaCheck => {
    const text = httpPart === 'querystring' || httpPart === 'params';
    const validate = (text ? coercing : strict).compile(opts.prepare ? opts.prepare(schema) : schema);
    const prefix = httpPart === 'body' ? '' : httpPart;
    return (data) => {
      if (validate(data)) return undefined;
      const messages = formatSchemaErrors(validate.errors ?? [], prefix, schema);
      return new ValidationError(messages, { param: firstField(messages) });
    };
  };
}

/** The field the first message names (`messages[0].role: ...` gives `messages[0].role`). */
function firstField(messages: string[]): string | undefined {
  const path = /^([^:\s]+):/.exec(messages[0] ?? '')?.[1];
  return path === undefined || path === '(body)' ? undefined : path;
}

/**
 * Fastify's validator compiler over schemaChecker: a request part that breaks its schema fails
 * with the ValidationError (Fastify passes an error the validator returns to the error handler).
 */
export function schemaValidatorCompiler(opts: SchemaValidatorOptions = {}) {
  const compile = schemaChecker(opts);
  return ({ schema, httpPart }: { schema: object; httpPart?: string }) => {
    const check = compile(schema, (httpPart ?? 'body') as HttpPart);
    return (data: unknown): true | { error: ValidationError } => {
      const error = check(data);
      return error ? { error } : true;
    };
  };
}
