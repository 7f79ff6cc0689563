// The console's folders are its architecture too (STYLE.md 14: the console is a client, typed
// like the server, with its own small components). `npm run lint` runs these rules:
//
//   depcruise console/src --config console/.dependency-cruiser.cjs
//
// Layers, from the top: main.tsx (the shell) -> pages/index.ts (the page list) -> one page's
// files (pages/<page>*.tsx) -> widgets/ (parts that load their own data, shared by pages) ->
// components/ (presentational parts) -> the plumbing beside them (api.ts, router.ts, hooks.ts,
// format.ts, phases.ts, wire.ts, ...). The server's source is read for types only, through wire.ts.

/** The console's source root. */
const CONSOLE = '^console/src/';
/** The top-level modules of console/src/ other than main.tsx: the plumbing every layer uses. */
const PLUMBING = '^console/src/(?!main\\.tsx$)[^/]+$';
/** The server's registries of names (task types, event names): names only, bundled for their values. */
const REGISTRY = [
  '^src/tasks/task-types\\.ts$',
  '^src/tasks/event-names\\.ts$',
  '^src/assets/event-names\\.ts$',
  '^src/live/event-names\\.ts$',
];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment:
        'No import cycle between modules (as src/ has none): two modules that import each other are one module in two files, and a page list that its pages import (for a props type) is the cycle this rule was written for.',
      severity: 'error',
      from: { path: CONSOLE },
      to: { circular: true },
    },
    {
      name: 'no-circular-folders',
      comment: 'No cycle between folders either: components/, widgets/ and pages/ are layers, one above the other.',
      severity: 'error',
      scope: 'folder',
      from: { path: CONSOLE },
      to: { circular: true },
    },
    {
      name: 'pages-do-not-import-each-other',
      comment:
        "A page's files (pages/<page>.tsx and its parts, pages/<page>-*.tsx; a list page's plural counts as its page: assets.tsx, asset.tsx, asset-tools.tsx) import no other page's: what two pages share is a widget (widgets/) or a component, so a page can change without breaking another.",
      severity: 'error',
      from: { path: '^console/src/pages/([a-z]+?)s?[-.]', pathNot: '^console/src/pages/index\\.ts$' },
      to: { path: '^console/src/pages/', pathNot: '^console/src/pages/$1s?[-.]' },
    },
    {
      name: 'only-the-shell-imports-pages',
      comment:
        'Pages are reached through their list (pages/index.ts), which only main.tsx imports: components, widgets and the plumbing know no page, and the pages know no list.',
      severity: 'error',
      from: { path: CONSOLE, pathNot: '^console/src/main\\.tsx$' },
      to: { path: '^console/src/pages/index\\.ts$' },
    },
    {
      name: 'the-shell-imports-the-page-list-only',
      comment: 'main.tsx reaches a page only through pages/index.ts, so adding a page is one line there.',
      severity: 'error',
      from: { path: '^console/src/main\\.tsx$' },
      to: { path: '^console/src/pages/', pathNot: '^console/src/pages/index\\.ts$' },
    },
    {
      name: 'below-the-pages-no-page',
      comment: 'components/, widgets/ and the plumbing are shared by every page, so they import none.',
      severity: 'error',
      from: { path: ['^console/src/components/', '^console/src/widgets/', PLUMBING] },
      to: { path: '^console/src/pages/' },
    },
    {
      name: 'components-are-presentational',
      comment:
        'components/ are small parts that show what they are given: they load nothing themselves (no widget), so any page can place them.',
      severity: 'error',
      from: { path: '^console/src/components/' },
      to: { path: '^console/src/widgets/' },
    },
    {
      name: 'plumbing-knows-no-ui',
      comment:
        'The plumbing (the API client, routing, hooks, formats, phases, the wire types) holds no UI: it imports no component and no widget.',
      severity: 'error',
      from: { path: PLUMBING },
      to: { path: ['^console/src/components/', '^console/src/widgets/'] },
    },
    {
      name: 'server-types-through-wire-ts',
      comment:
        "The console is a client (STYLE.md 14): it reads the server's source only for the wire contract's types, in one place (wire.ts), so a drift in the contract is a type error there. The registries of names (task types, event names) are the modules read for their values (what a filter or the webhook form offers): they are names only.",
      severity: 'error',
      from: { path: CONSOLE, pathNot: '^console/src/wire\\.ts$' },
      to: { path: '^src/', pathNot: REGISTRY },
    },
    {
      name: 'wire-ts-reads-the-contract-only',
      comment:
        "wire.ts takes the API's wire contract (src/api/contract/) and the LLM gateway's route schemas (its wire contract for /api/ledger), nothing else of the server.",
      severity: 'error',
      from: { path: '^console/src/wire\\.ts$' },
      to: { path: '^src/', pathNot: ['^src/api/contract/', '^src/llm/gateway/schemas\\.ts$'] },
    },
    {
      name: 'no-server-code-in-the-bundle',
      comment:
        'An import of the server that is not type-only would bundle server code (and what it imports) into the browser; types are erased. Only the registries of names are bundled.',
      severity: 'error',
      from: { path: CONSOLE },
      to: { path: '^src/', pathNot: REGISTRY, dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'the-registry-stays-names',
      comment:
        'The registries the console bundles import nothing at run time, so bundling them never pulls more of the server.',
      severity: 'error',
      from: { path: REGISTRY },
      to: { dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'no-node-builtins',
      comment: 'The console runs in a browser: a node: module would not bundle (or would bundle a shim).',
      severity: 'error',
      from: { path: CONSOLE },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'not-to-dev-dep',
      comment:
        '`mediaplane start` builds the console where only dependencies are installed (npm ci --omit=dev), so the bundle imports no devDependency; types from one are erased.',
      severity: 'error',
      from: { path: CONSOLE },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import that resolves to nothing is a typo or a missing dependency.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // The server's modules are where the console's imports end: their own rules are src/'s
    // (.dependency-cruiser.cjs); following them would cruise the whole server here.
    doNotFollow: {
      path: [
        'node_modules',
        '^src/(?!tasks/task-types\\.ts$|tasks/event-names\\.ts$|assets/event-names\\.ts$|live/event-names\\.ts$)',
      ],
    },
    // Type-only imports are dependencies too: a cycle of `import type` is still two modules
    // that know each other, and the rules above tell the kinds apart.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'console/tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'browser', 'default', 'types'],
      extensions: ['.ts', '.tsx', '.js', '.mjs', '.json', '.d.ts'],
    },
  },
};
