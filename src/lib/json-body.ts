import type { FastifyRequest } from 'fastify';
import { BadRequestError } from './errors.ts';

// The JSON body parser of every HTTP server the service starts (the API's app, which the
// gateway and a local orchestrator share, and a standalone orchestrator's). A body nested
// 100,000 deep was a 500 (RangeError in JSON.stringify) and a 2000-deep `const` a 502 (a
// recursive walk of the schema) (issue #25): the nesting is measured on the text, before any
// object is built, and a body past MEDIAPLANE_BODY_MAX_DEPTH is the caller's mistake, a 400.

/**
 * Whether JSON text nests objects and arrays more than `maxDepth` levels (`{}` is one level).
 * One pass over the text with a counter: no recursion, so no body can overflow it. Brackets
 * inside strings are text. Text that is not JSON may be miscounted; JSON.parse refuses it anyway.
 */
export function nestedDeeperThan(text: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') {
      if (++depth > maxDepth) return true;
    } else if (c === '}' || c === ']') depth--;
  }
  return false;
}

/** The message of a body past the limit, the same on every API (each wraps it in its own shape). */
const tooDeepMessage = (maxDepth: number): string => `request body is nested deeper than ${maxDepth} levels`;

type Done = (err: Error | null, body?: unknown) => void;

/**
 * Fastify's content-type parser for application/json (`parseAs: 'string'`). An empty body is
 * what several clients send to POST routes without one (cancel, retry): it is no body rather
 * than malformed JSON.
 */
export function jsonBodyParser(opts: { maxDepth: number }) {
  return (_req: FastifyRequest, body: string | Buffer, done: Done): void => {
    let value: unknown;
    try {
      value = parseBody(typeof body === 'string' ? body : body.toString('utf8'), opts.maxDepth);
    } catch (err) {
      done(err instanceof Error ? err : new BadRequestError('request body is not valid JSON'));
      return;
    }
    done(null, value);
  };
}

/** The value of a JSON body; undefined for an empty one; BadRequestError for one past maxDepth or not JSON. */
function parseBody(text: string, maxDepth: number): unknown {
  if (text.trim() === '') return undefined;
  if (nestedDeeperThan(text, maxDepth)) throw new BadRequestError(tooDeepMessage(maxDepth));
  try {
    return JSON.parse(text);
  } catch {
    throw new BadRequestError('request body is not valid JSON');
  }
}
