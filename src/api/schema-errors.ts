import type { FastifySchemaValidationError } from 'fastify';

// Turns ajv's errors into messages that name the field path and the rule, e.g.
// `input.url: must be a string` (spec/API.md "Errors"). A union (anyOf) reports only the
// branch the client most likely meant, not every branch's complaints.

interface Item {
  path: string;
  message: string;
  schemaPath: string;
  keyword: string;
  allowed?: unknown;
}

function fieldPath(instancePath: string, prefix: string): string {
  const parts = instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  const joined = parts.map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
  return joined === '' ? prefix : prefix === '' ? joined : `${prefix}.${joined}`;
}

function describe(e: FastifySchemaValidationError, prefix: string): Item {
  const p = e.params as Record<string, unknown>;
  const path = fieldPath(e.instancePath, prefix);
  const at = (child: unknown) => (path === '' ? String(child) : `${path}.${String(child)}`);
  const base = { schemaPath: e.schemaPath, keyword: e.keyword };
  switch (e.keyword) {
    case 'required':
      return { ...base, path: at(p.missingProperty), message: 'is required' };
    case 'additionalProperties':
      return { ...base, path: at(p.additionalProperty), message: 'is not a known property' };
    case 'const':
      return { ...base, path, message: `must be ${JSON.stringify(p.allowedValue)}`, allowed: p.allowedValue };
    case 'type':
      return { ...base, path, message: `must be ${/^[aeiou]/.test(String(p.type)) ? 'an' : 'a'} ${String(p.type)}` };
    case 'minProperties':
      return { ...base, path, message: `must have at least ${String(p.limit)} of its properties` };
    default:
      return { ...base, path, message: e.message ?? `breaks the rule ${e.keyword}` };
  }
}

/** Keeps one branch per anyOf: the one with the fewest complaints (a wrong `type` counts most). */
function resolveUnions(items: Item[]): Item[] {
  const unions = items.filter((i) => i.keyword === 'anyOf').sort((a, b) => b.schemaPath.length - a.schemaPath.length);
  let rest = items;
  for (const u of unions) {
    const base = u.schemaPath.replace(/\/anyOf$/, '/anyOf/');
    const branches = new Map<string, Item[]>();
    for (const i of rest) {
      const m = i.schemaPath.startsWith(base) ? /^(\d+)/.exec(i.schemaPath.slice(base.length)) : null;
      if (m?.[1]) branches.set(m[1], [...(branches.get(m[1]) ?? []), i]);
    }
    const inUnion = new Set([u, ...[...branches.values()].flat()]);
    rest = rest.filter((i) => !inUnion.has(i));
    const groups = [...branches.values()];
    const consts = groups.every((g) => g.length === 1 && g[0]?.keyword === 'const' && g[0].path === u.path);
    if (consts || groups.length === 0) {
      const allowed = groups.map((g) => g[0]?.allowed);
      rest.push({
        ...u,
        keyword: 'enum',
        allowed,
        message: allowed.length
          ? `must be one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}`
          : 'does not match any allowed shape',
      });
      continue;
    }
    // Every branch refuses the same discriminator field (`type`): the value itself is wrong,
    // so say which values are allowed rather than what one branch would also need.
    const discriminators = groups.map((g) => g.find((i) => i.keyword === 'const' || i.keyword === 'enum'));
    const first = discriminators[0];
    if (first && discriminators.every((d) => d?.path === first.path)) {
      const allowed = discriminators.flatMap((d) => (Array.isArray(d?.allowed) ? d.allowed : [d?.allowed]));
      rest.push({
        ...first,
        keyword: 'enum',
        allowed,
        message: `must be one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}`,
      });
      continue;
    }
    // A branch whose type does not fit the value at all is the least likely meant; one that
    // refuses a discriminator (`type`) comes next; otherwise the fewest complaints win.
    const cost = (i: Item) =>
      i.keyword === 'type' && i.path === u.path ? 1000 : i.keyword === 'const' || i.keyword === 'enum' ? 100 : 1;
    const weight = (g: Item[]) => g.reduce((n, i) => n + cost(i), 0);
    const best = groups.reduce((a, b) => (weight(b) < weight(a) ? b : a));
    rest.push(...best);
  }
  return rest;
}

export function formatSchemaErrors(errors: FastifySchemaValidationError[], prefix = ''): string[] {
  const items = resolveUnions(errors.map((e) => describe(e, prefix)));
  const messages = items.map((i) => `${i.path === '' ? '(body)' : i.path}: ${i.message}`);
  return [...new Set(messages)];
}
