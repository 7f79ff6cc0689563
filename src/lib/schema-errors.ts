// Turns ajv's errors into messages that name the field path and the rule, e.g.
// `input.url: must be a string` (spec/API.md "Errors"). A union (anyOf) reports only the
// branch the client most likely meant, not every branch's complaints. A schema may word its
// own rules (ERROR_MESSAGE below), so a route keeps the messages its clients know while the
// schema stays the one source of the rules (issue #16: the chat body's messages).

/** One ajv error, as ajv and Fastify give it (`data` when ajv runs with `verbose`). */
export interface SchemaError {
  keyword: string;
  instancePath: string;
  schemaPath: string;
  params: Record<string, unknown>;
  message?: string | undefined;
  data?: unknown;
}

/**
 * The schema annotation (ignored by validators, shown in the OpenAPI document) that words a
 * node's rules: one message for any rule the node or anything inside it breaks, or one per ajv
 * keyword of the node itself (`integer`: a number that is not whole; `required`: said of a
 * missing property by the property's own schema), with `default` for the rest. `{value}`
 * stands for the value given.
 */
export const ERROR_MESSAGE = 'errorMessage';
export type RuleMessages = string | { [keyword: string]: string | undefined; default?: string | undefined };

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

function describe(e: SchemaError, prefix: string): Item {
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

type SchemaNode = Record<string, unknown>;

function isNode(v: unknown): v is SchemaNode {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A schema node on an error's schema path, and how many levels into the value it sits. */
interface Step {
  node: SchemaNode;
  depth: number;
}

// Keywords whose subschema applies to the same value, and those that step into a child.
const SAME_VALUE = new Set(['not', 'if', 'then', 'else']);
const BRANCHES = new Set(['anyOf', 'oneOf', 'allOf']);
const NAMED_CHILD = new Set(['properties', 'patternProperties']);

/** The schema nodes from the root to the one whose keyword failed (the path's last segment). */
function stepsTo(root: SchemaNode, schemaPath: string): Step[] {
  const segs = schemaPath
    .replace(/^#\/?/, '')
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .slice(0, -1);
  const steps: Step[] = [{ node: root, depth: 0 }];
  let { node, depth } = steps[0] as Step;
  for (let i = 0; i < segs.length; ) {
    const k = segs[i] ?? '';
    const sub = node[k];
    let next: unknown;
    if (NAMED_CHILD.has(k) || BRANCHES.has(k) || (k === 'items' && Array.isArray(sub))) {
      next = (sub as Record<string, unknown> | undefined)?.[segs[i + 1] ?? ''];
      if (!BRANCHES.has(k)) depth++;
      i += 2;
    } else {
      next = sub;
      if (!SAME_VALUE.has(k)) depth++;
      i += 1;
    }
    if (!isNode(next)) break;
    node = next;
    steps.push({ node, depth });
  }
  return steps;
}

function messagesOf(node: SchemaNode | undefined): RuleMessages | undefined {
  const m = node?.[ERROR_MESSAGE];
  return typeof m === 'string' || isNode(m) ? (m as RuleMessages) : undefined;
}

/** The message `m` words for `keyword` (`specific`: worded for it, not a default). */
function pick(m: RuleMessages, keyword: string, own: boolean): { text: string; specific: boolean } | undefined {
  if (typeof m === 'string') return { text: m, specific: true };
  const text = own ? m[keyword] : undefined;
  if (text !== undefined) return { text, specific: true };
  return m.default === undefined ? undefined : { text: m.default, specific: false };
}

function withValue(text: string, e: SchemaError): string {
  return text.includes('{value}') ? text.replaceAll('{value}', JSON.stringify(e.data) ?? 'undefined') : text;
}

interface Worded {
  path: string;
  text: string;
  specific: boolean;
}

/** The schema's own wording of `e`, when the schema has one for it. */
function worded(root: SchemaNode, e: SchemaError, prefix: string): Worded | undefined {
  const steps = stepsTo(root, e.schemaPath);
  const here = steps[steps.length - 1] as Step;
  const path = fieldPath(e.instancePath, prefix);
  const child = (name: unknown) => (path === '' ? String(name) : `${path}.${String(name)}`);
  const p = e.params;
  if (e.keyword === 'required') {
    const props = here.node.properties;
    const m = messagesOf(isNode(props) ? (props[String(p.missingProperty)] as SchemaNode | undefined) : undefined);
    const w = m === undefined ? undefined : pick(m, 'required', true);
    return w && { path: child(p.missingProperty), text: w.text, specific: true };
  }
  if (e.keyword === 'additionalProperties') {
    const m = messagesOf(here.node);
    const w = m === undefined ? undefined : pick(m, 'additionalProperties', true);
    return w && { path: child(p.additionalProperty), text: w.text, specific: true };
  }
  const depth = e.instancePath.split('/').length - 1;
  for (let i = steps.length - 1; i >= 0; i--) {
    const s = steps[i] as Step;
    const m = messagesOf(s.node);
    if (!m) continue;
    const keyword = e.keyword === 'type' && p.type === 'integer' && typeof e.data === 'number' ? 'integer' : e.keyword;
    const w = pick(m, keyword, s.depth === depth);
    if (!w) return undefined;
    const at = e.instancePath
      .split('/')
      .slice(0, s.depth + 1)
      .join('/');
    return { path: fieldPath(at, prefix), text: withValue(w.text, e), specific: w.specific };
  }
  return undefined;
}

/**
 * Messages for ajv's errors, each `path: rule`; `prefix` names the request part (`querystring`)
 * and `root` is the schema validated, whose own wording (ERROR_MESSAGE) wins where it has one.
 */
export function formatSchemaErrors(errors: SchemaError[], prefix = '', root?: object): string[] {
  const own = new Map<string, Worded>();
  const generic: SchemaError[] = [];
  for (const e of errors) {
    const w = isNode(root) ? worded(root, e, prefix) : undefined;
    if (!w) generic.push(e);
    // One message per field: the first worded for the keyword that failed (the branch of a
    // union that the value's type fits comes first), else the first default.
    else if (!own.has(w.path) || (w.specific && !own.get(w.path)?.specific)) own.set(w.path, w);
  }
  const items = [
    ...[...own.values()].map((w) => ({ path: w.path, message: w.text })),
    ...resolveUnions(generic.map((e) => describe(e, prefix))),
  ];
  const messages = items.map((i) => `${i.path === '' ? '(body)' : i.path}: ${i.message}`);
  return [...new Set(messages)];
}
