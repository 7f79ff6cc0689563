// Builds the browser console (issue #29): console/src -> console/dist, with esbuild's API.
// Hashed file names under dist/assets/ (served with a year's cache) and an index.html that
// names them (served fresh); hls.js and other `import()`s become chunks loaded when used.
//
//   node scripts/build-console.ts             build
//   node scripts/build-console.ts --if-stale  build only when dist is missing or older than
//                                             its sources (what `mediaplane start` runs)
//
// esbuild is a dependency, not a devDependency: `npm ci --omit=dev` installs a server that
// still builds its console (npm runs `prepare` for `npm ci`, and `mediaplane start` builds a
// stale console).

import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const consoleDir = path.join(root, 'console');
const dist = path.join(consoleDir, 'dist');
/**
 * What the last build read outside console/ (the server's registries of names), as its
 * metafile listed them: a change there makes the console stale too. Not served: only
 * index.html, the favicon and assets/ are (api/console-routes.ts).
 */
const SOURCES = 'sources.json';

/** The newest modification time among the console's sources and this script. */
function newestSource(): number {
  let newest = statSync(fileURLToPath(import.meta.url)).mtimeMs;
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else newest = Math.max(newest, statSync(p).mtimeMs);
    }
  };
  walk(path.join(consoleDir, 'src'));
  for (const f of ['index.html', 'favicon.svg', 'tsconfig.json'])
    newest = Math.max(newest, statSync(path.join(consoleDir, f)).mtimeMs);
  return newest;
}

/** The files outside console/ that the last build bundled (none before a first build). */
function builtFromOutside(): string[] {
  try {
    const files: unknown = JSON.parse(readFileSync(path.join(dist, SOURCES), 'utf8'));
    return Array.isArray(files) ? files.filter((f): f is string => typeof f === 'string') : [];
  } catch {
    return [];
  }
}

export function consoleIsStale(): boolean {
  const index = path.join(dist, 'index.html');
  if (!existsSync(index)) return true;
  const built = statSync(index).mtimeMs;
  const outside = builtFromOutside().map((f) => path.join(root, f));
  return built < newestSource() || outside.some((f) => !existsSync(f) || statSync(f).mtimeMs > built);
}

export async function buildConsole(): Promise<{ files: string[] }> {
  const esbuild = await import('esbuild');
  // Built aside and moved into place, so a server reading dist (or a second build, as when
  // tests start in parallel) never sees half a build.
  const staging = `${dist}.building-${process.pid}-${Date.now()}`;
  const out = path.join(staging, 'assets');
  mkdirSync(out, { recursive: true });
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [path.join(consoleDir, 'src/main.tsx')],
    bundle: true,
    splitting: true,
    format: 'esm',
    target: ['es2022', 'chrome111', 'firefox113', 'safari16'],
    outdir: out,
    entryNames: '[name]-[hash]',
    chunkNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    minify: true,
    sourcemap: 'linked',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    tsconfig: path.join(consoleDir, 'tsconfig.json'),
    metafile: true,
    legalComments: 'linked',
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'warning',
  });
  const outputs = Object.entries(result.metafile.outputs);
  const entry = outputs.find(([, o]) => o.entryPoint?.endsWith('console/src/main.tsx'));
  if (!entry) throw new Error('esbuild made no entry script');
  const [script, meta] = entry;
  const url = (file: string) => `/${path.relative(staging, path.join(root, file)).split(path.sep).join('/')}`;
  // The chunks the entry imports statically are preloaded, so they arrive with it.
  const preloads = meta.imports.filter((i) => i.kind === 'import-statement').map((i) => url(i.path));
  const styles = meta.cssBundle ? [url(meta.cssBundle)] : [];
  const html = readFileSync(path.join(consoleDir, 'index.html'), 'utf8')
    .replace('<!-- STYLES -->', styles.map((s) => `<link rel="stylesheet" href="${s}" />`).join('\n    '))
    .replace(
      '<!-- SCRIPTS -->',
      [
        ...preloads.map((p) => `<link rel="modulepreload" href="${p}" />`),
        `<script type="module" src="${url(script)}"></script>`,
      ].join('\n    '),
    );
  copyFileSync(path.join(consoleDir, 'favicon.svg'), path.join(staging, 'favicon.svg'));
  const outside = Object.keys(result.metafile.inputs).filter((f) => !/^(console|node_modules)\//.test(f));
  writeFileSync(path.join(staging, SOURCES), `${JSON.stringify(outside)}\n`);
  writeFileSync(path.join(staging, 'index.html'), html);
  rmSync(dist, { recursive: true, force: true });
  try {
    renameSync(staging, dist);
  } catch (e) {
    // Another build moved its copy in first: it is as fresh as this one.
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(path.join(dist, 'index.html'))) throw e;
  }
  return { files: outputs.map(([f]) => f) };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const ifStale = process.argv.includes('--if-stale');
  if (ifStale && !consoleIsStale()) process.exit(0);
  const started = Date.now();
  const { files } = await buildConsole();
  process.stderr.write(`console built into console/dist (${files.length} files, ${Date.now() - started} ms)\n`);
}
