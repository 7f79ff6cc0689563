// Numbers and strings: the keywords on them that the grammar's own rules already imply.

import { cannotEnforce, type Doc, problem } from './doc.ts';
import { count, NUMBER_FORMATS } from './keywords.ts';
import { FORMAT_LENGTH, INTEGER_LIMIT, type JsonType, NUMBER_LIMIT, type Path, type Shape } from './shape.ts';

/**
 * minimum, maximum and the exclusive ones are accepted only where every number the grammar can
 * write already satisfies them: zod's `z.number().int()` sends the safe-integer bounds, and an
 * integer of the grammar has at most 15 digits. multipleOf 1 on integers likewise, and the
 * number formats of OpenAPI generators (ajv-formats checks them) that hold every such number:
 * int64 for integers, double; int32 and float do not.
 */
export function checkNumberBounds(doc: Doc, schema: Record<string, unknown>, path: Path, types: JsonType[]): void {
  const numeric = types.filter((t) => t === 'number' || t === 'integer');
  if (numeric.length === 0) return; // they apply to numbers only
  const fractional = numeric.includes('number');
  const format = schema.format;
  if (NUMBER_FORMATS.has(format) && !(format === 'double' || (format === 'int64' && !fractional)))
    problem(
      doc,
      [...path, 'format'],
      `${JSON.stringify(format)} is not supported on numbers: the llama.cpp engine cannot enforce it`,
    );
  const limit = fractional ? NUMBER_LIMIT : INTEGER_LIMIT;
  const implied: Record<string, (v: number) => boolean> = {
    minimum: (v) => v <= -limit,
    exclusiveMinimum: (v) => v < -limit,
    maximum: (v) => v >= limit,
    exclusiveMaximum: (v) => v > limit,
    multipleOf: (v) => v === 1 && !fractional,
  };
  for (const [k, ok] of Object.entries(implied)) {
    const v = schema[k];
    if (v !== undefined && !(typeof v === 'number' && ok(v))) cannotEnforce(doc, [...path, k]);
  }
}

export function stringShape(doc: Doc, schema: Record<string, unknown>, path: Path): Shape {
  const min = count(doc, schema, path, 'minLength') ?? 0;
  const max = count(doc, schema, path, 'maxLength');
  if (max !== undefined && max < min) return problem(doc, [...path, 'maxLength'], 'is below minLength: no string fits');
  const format = schema.format;
  if (format === undefined || NUMBER_FORMATS.has(format)) return { kind: 'string', min, max };
  if (format !== 'date' && format !== 'time' && format !== 'date-time')
    return problem(
      doc,
      [...path, 'format'],
      `${JSON.stringify(format)} is not supported: the llama.cpp engine enforces only date, time and date-time`,
    );
  // The grammar writes the format's own lengths; bounds tighter than those cannot be enforced.
  const [fmin, fmax] = FORMAT_LENGTH[format];
  if (min > fmin) return cannotEnforce(doc, [...path, 'minLength']);
  if (max !== undefined && max < fmax) return cannotEnforce(doc, [...path, 'maxLength']);
  return { kind: 'format', format };
}
