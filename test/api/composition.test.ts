// main.ts (and its parts, main-*.ts) is the one composition root (STYLE.md, practice 1): it
// builds every store and service and hands them in. The API edge builds none, so there is one
// of each per process (one signing-key store, one Idempotency-Keys table's waiters), the tests'
// settings reach every route, and a routes module's deps say what it uses. Checked here because
// the folders' rules (.dependency-cruiser.cjs) see modules, not names: src/api/ imports values
// from the domains' index.ts (task types, helpers) beside the store classes' types.

import assert from 'node:assert/strict';
import { globSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const IMPORT = /^import\s+(type\s+)?(?:(\w+)\s*,?\s*)?(?:\{([^}]*)\})?\s*from\s+'([^']+)';/gm;

/** Each name a file imports as a value (not `import type`), with the module it comes from. */
function valueImports(text: string): Map<string, string> {
  const names = new Map<string, string>();
  for (const [, typeOnly, defaultName, braced, from] of text.matchAll(IMPORT)) {
    if (typeOnly || from === undefined) continue;
    if (defaultName) names.set(defaultName, from);
    for (const item of (braced ?? '').split(',')) {
      const spec = item.trim();
      if (!spec || spec.startsWith('type ')) continue;
      names.set(spec.split(/\s+as\s+/).at(-1) ?? spec, from);
    }
  }
  return names;
}

/** `new X(...)` in `file` of a class imported from src/ outside lib/ (errors aside: a request makes those). */
function builtIn(file: string, text: string): string[] {
  const imports = valueImports(text);
  const found: string[] = [];
  for (const [, name] of text.matchAll(/\bnew\s+([A-Z]\w*)/g)) {
    const from = name === undefined ? undefined : imports.get(name);
    if (!name || !from?.startsWith('.') || name.endsWith('Error')) continue;
    const target = relative(ROOT, join(dirname(join(ROOT, file)), from));
    if (!target.startsWith('src/lib/')) found.push(`${file}: new ${name} (from ${target})`);
  }
  return found;
}

it('nothing under src/api/ builds a store or a service of src/: main.ts builds them and hands them in', () => {
  const files = globSync('src/api/**/*.ts', { cwd: ROOT });
  assert.ok(files.length > 20, `files: ${files.join(', ')}`);
  assert.deepEqual(
    files.flatMap((f) => builtIn(f, readFileSync(join(ROOT, f), 'utf8'))),
    [],
  );
});

it('the check finds a store built from a value import, and not one imported as a type', () => {
  const text = [
    "import { SigningKeyStore } from '../access/index.ts';",
    "import type { UsageStore } from '../usage/index.ts';",
    "import { NotFoundError } from '../lib/errors.ts';",
    "import { Wakeup } from '../lib/wakeup.ts';",
    'const keys = new SigningKeyStore(db);',
    'const wake = new Wakeup();',
    'throw new NotFoundError();',
  ].join('\n');
  assert.deepEqual(builtIn('src/api/app.ts', text), ['src/api/app.ts: new SigningKeyStore (from src/access/index.ts)']);
});
