// The console's bundle holds no server code (docs/console.md "Its rules"): the console reads
// the server's wire contract for its types only, which the build erases, and bundles only the
// server's registries of names. Checked on what esbuild really puts in the bundle, beside the
// dependency rules that check the imports (console/.dependency-cruiser.cjs).

import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const REGISTRIES = [
  'src/tasks/task-types.ts',
  'src/tasks/event-names.ts',
  'src/assets/event-names.ts',
  'src/live/event-names.ts',
];

/** The files esbuild bundles for the console, relative to the repository's root. */
async function bundledInputs(): Promise<string[]> {
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: ['console/src/main.tsx'],
    bundle: true,
    splitting: true,
    format: 'esm',
    outdir: path.join(tmpdir(), 'console-bundle-check'),
    write: false,
    metafile: true,
    jsx: 'automatic',
    jsxImportSource: 'preact',
    tsconfig: 'console/tsconfig.json',
    logLevel: 'silent',
  });
  return Object.keys(result.metafile.inputs);
}

it('the console bundle takes nothing of the server but its registries of names', async () => {
  const inputs = await bundledInputs();
  const server = inputs.filter((f) => f.startsWith('src/'));
  assert.deepEqual(server.sort(), [...REGISTRIES].sort());
  const serverPackages = inputs.filter((f) =>
    /node_modules\/(@sinclair\/typebox|fastify|pg|@electric-sql|pino)\//.test(f),
  );
  assert.deepEqual(serverPackages, []);
  assert.ok(
    inputs.some((f) => f.includes('node_modules/preact/')),
    'the bundle has the console itself',
  );
});
