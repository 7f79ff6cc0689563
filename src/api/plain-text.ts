import type { ErrorObject, FuncKeywordDefinition } from 'ajv';
import { plainTextProblem } from '../lib/text.ts';

// One rule for every string of every request part the API validates (issue #15): rather
// than a pattern on each string field (one forgotten field is a 500 again), the validator
// compiler adds this keyword to the root of each schema, and it walks the whole value.
// Its errors are ordinary ajv errors, so they come out as `creatorId: must not contain
// control characters ...` with the other rule breaks of the same request.

export const PLAIN_TEXT_KEYWORD = 'mediaplanePlainText';

const escapePointer = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** Every string inside `value` that is not plain text, as ajv errors at its JSON pointer. */
function plainTextErrors(value: unknown, basePath: string): Partial<ErrorObject>[] {
  const errors: Partial<ErrorObject>[] = [];
  // An explicit stack: a body nested thousands of levels deep must not overflow ours.
  const stack: Array<[unknown, string]> = [[value, basePath]];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [v, path] = next;
    if (typeof v === 'string') {
      const problem = plainTextProblem(v);
      if (problem) errors.push({ instancePath: path, keyword: PLAIN_TEXT_KEYWORD, message: problem, params: {} });
    } else if (Array.isArray(v)) {
      for (const [i, item] of v.entries()) stack.push([item, `${path}/${i}`]);
    } else if (typeof v === 'object' && v !== null) {
      for (const [k, item] of Object.entries(v)) stack.push([item, `${path}/${escapePointer(k)}`]);
    }
  }
  // The stack visits the last property first; report in the order the client wrote them.
  return errors.reverse();
}

// ajv's own name for this shape (DataValidateFunction) is not exported.
interface DataValidate {
  (data: unknown, cxt?: { instancePath: string }): boolean;
  errors?: Partial<ErrorObject>[];
}

const validate: DataValidate = (data, cxt) => {
  const errors = plainTextErrors(data, cxt?.instancePath ?? '');
  validate.errors = errors;
  return errors.length === 0;
};

/** The ajv keyword (its value in a schema is not read), for the `keywords` option of Ajv. */
export const plainTextKeyword: FuncKeywordDefinition = {
  keyword: PLAIN_TEXT_KEYWORD,
  schema: false,
  errors: true,
  validate,
};

/** `schema` with the plain-text rule added at its root. */
export function withPlainText(schema: object): object {
  return { ...schema, [PLAIN_TEXT_KEYWORD]: true };
}
