// The folders are the architecture (docs: STYLE.md, "Layout"); these rules keep them so
// (issue #16). Data flows one way: api -> tasks -> (queue) -> transcode -> storage, with lib/
// and config/ under everything; main.ts and cli/ are the two top-level consumers; the LLM
// gateway and orchestrator talk over HTTP only. `npm run deps` checks them.

/** A path regex for one folder of src/ (and everything under it). */
const folder = (name) => `^src/${name}/`;
const DOMAINS = '^src/(access|accounts|api|assets|config|db|lib|llm|storage|tasks|transcode|usage|webhooks|live)/';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular-folders',
      comment: 'Two folders that import each other are one folder in two places: no cycle between folders.',
      severity: 'error',
      scope: 'folder',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'no-circular',
      comment: 'No import cycle between modules either, inside a folder included.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'no-domain-to-consumers',
      comment: 'main.ts (the composition root) and cli/ use the domains; no domain imports them.',
      severity: 'error',
      from: { path: DOMAINS },
      to: { path: ['^src/main\\.ts$', folder('cli')] },
    },
    {
      name: 'no-domain-to-api',
      comment: "The API is the edge: wire contracts live there (api/contract/), and no domain reads a wire schema.",
      severity: 'error',
      // main.ts and its parts (main-*.ts) are the composition root.
      from: { path: '^src/', pathNot: ['^src/main\\.ts$', '^src/main-[a-z]+\\.ts$', folder('api'), folder('cli')] },
      to: { path: folder('api') },
    },
    {
      name: 'lib-knows-no-domain',
      comment: 'lib/ holds small helpers with no domain knowledge: it imports nothing else of src/.',
      severity: 'error',
      from: { path: folder('lib') },
      to: { path: '^src/', pathNot: folder('lib') },
    },
    {
      name: 'config-knows-no-domain',
      comment: 'config/ is one schema for all settings: it may use lib/, nothing else of src/.',
      severity: 'error',
      from: { path: folder('config') },
      to: { path: '^src/', pathNot: [folder('config'), folder('lib')] },
    },
    {
      name: 'storage-knows-no-transcoding',
      comment: 'storage/ has its own input and location types; it knows nothing of the jobs that use it.',
      severity: 'error',
      from: { path: folder('storage') },
      to: { path: [folder('transcode'), folder('tasks'), folder('api'), folder('llm'), folder('accounts')] },
    },
    {
      name: 'tasks-knows-no-task-type',
      comment:
        'tasks/ is the generic Task (model, store, queue, worker): handlers are given to it, so a new task type is a new handler and a new contract file.',
      severity: 'error',
      from: { path: folder('tasks') },
      to: { path: [folder('transcode'), folder('storage'), folder('api'), folder('llm')] },
    },
    {
      name: 'transcode-below-the-api',
      comment: 'transcode/ is a domain: it may use storage/ and the task types, never the LLM side.',
      severity: 'error',
      from: { path: folder('transcode') },
      to: { path: [folder('llm'), folder('accounts')] },
    },
    {
      name: 'chunked-through-the-format-registry',
      comment:
        'The chunked run (transcode/chunked/) loops over the output formats as the single run does, each format saying how its pieces are encoded and stitched: it reaches them only through outputs/index.ts, so a new format needs no edit there and is never silently left out of a long input.',
      severity: 'error',
      from: { path: '^src/transcode/chunked/' },
      to: { path: '^src/transcode/outputs/', pathNot: '^src/transcode/outputs/index\\.ts$' },
    },
    {
      name: 'webhooks-know-events-not-task-types',
      comment:
        'webhooks/ delivers the outbox of tasks/ (its events, read from the database); the payload is rendered by main.ts from the API contract, so it knows no task type, no wire shape and no other domain.',
      severity: 'error',
      from: { path: folder('webhooks') },
      to: { path: [folder('transcode'), folder('storage'), folder('llm'), folder('accounts')] },
    },
    {
      name: 'assets-below-the-api',
      comment:
        'assets/ (issue #27) keeps videos: it may use tasks/, transcode/ and storage/ (the built-in store), never the LLM side or the webhooks; its wire shapes are in api/contract/.',
      severity: 'error',
      from: { path: folder('assets') },
      to: { path: [folder('llm'), folder('webhooks'), folder('accounts')] },
    },
    {
      name: 'no-domain-to-assets',
      comment:
        "Only the API edge and main.ts use assets/; the domains it builds on know nothing of it, but the names of its webhook events (assets/event-names.ts, a leaf that imports nothing), which the outbox's readers take from there instead of spelling them again.",
      severity: 'error',
      from: { path: [folder('tasks'), folder('transcode'), folder('storage'), folder('webhooks'), folder('llm')] },
      to: { path: folder('assets'), pathNot: '^src/assets/event-names\\.ts$' },
    },
    {
      name: 'ingest-listeners-know-no-streams',
      comment:
        'The RTMP server and the SRT relay speak their wire protocol and hand a publish to the gate of live/ingest-types.ts: who may publish, and what becomes of the media, is the runtime\'s (live/node.ts, live/session.ts). So a listener never reads the stream store, the database or the ladder.',
      severity: 'error',
      from: { path: ['^src/live/rtmp/', '^src/live/srt/'] },
      to: {
        path: '^src/',
        pathNot: ['^src/live/rtmp/', '^src/live/srt/', '^src/live/ingest-types\\.ts$', '^src/live/amf0\\.ts$', folder('lib'), '^src/transcode/media-input\\.ts$'],
      },
    },
    {
      name: 'llhls-is-a-packager',
      comment:
        'live/llhls/ turns fragmented MP4 into low-latency HLS and knows nothing else: no streams, no ingest, no HTTP, so a second node or the store can serve what it makes.',
      severity: 'error',
      from: { path: '^src/live/llhls/' },
      to: { path: '^src/', pathNot: ['^src/live/llhls/', folder('lib')] },
    },
    {
      name: 'live-below-the-api',
      comment:
        'live/ takes streams in and makes their ladder; the API edge shows them. It never reaches the LLM side, the asset pipeline or the webhook dispatcher (its events reach the outbox in SQL, as assets\' do).',
      severity: 'error',
      from: { path: folder('live') },
      to: { path: [folder('llm'), folder('assets'), folder('webhooks')] },
    },
    {
      name: 'no-domain-to-live',
      comment:
        "Only the API edge and main.ts use live/; the domains below it know nothing of it, but the names of its webhook events (live/event-names.ts, a leaf that imports nothing).",
      severity: 'error',
      from: { path: [folder('tasks'), folder('transcode'), folder('storage'), folder('webhooks'), folder('llm'), folder('assets')] },
      to: { path: folder('live'), pathNot: '^src/live/event-names\\.ts$' },
    },
    {
      name: 'access-below-the-api',
      comment:
        'access/ (issue #28) keeps signing keys and checks playback JWTs: it may use db/, lib/ and config/, nothing above them; which asset a token opens is the API edge\'s question (api/media-access.ts).',
      severity: 'error',
      from: { path: folder('access') },
      to: { path: '^src/', pathNot: [folder('access'), folder('db'), folder('lib'), folder('config')] },
    },
    {
      name: 'usage-below-the-api',
      comment:
        "usage/ (issue #32) reads what the limiter, the ledger and the tasks recorded, in SQL of its own: it may use db/ and lib/, nothing above them; its wire shapes are in api/contract/usage.ts.",
      severity: 'error',
      from: { path: folder('usage') },
      to: { path: '^src/', pathNot: [folder('usage'), folder('db'), folder('lib')] },
    },
    {
      name: 'no-domain-to-access',
      comment: 'Only the API edge and main.ts use access/; no other domain knows of signing keys.',
      severity: 'error',
      from: {
        path: [folder('tasks'), folder('transcode'), folder('storage'), folder('webhooks'), folder('llm'), folder('assets')],
      },
      to: { path: folder('access') },
    },
    {
      name: 'gateway-and-orchestrator-talk-over-http',
      comment:
        'They are separate processes at scale and share no memory; both may import llm/protocol/ and llm/ledger.ts.',
      severity: 'error',
      from: { path: folder('llm/gateway') },
      to: { path: folder('llm/orchestrator') },
    },
    {
      name: 'orchestrator-and-gateway-talk-over-http',
      comment: 'See gateway-and-orchestrator-talk-over-http.',
      severity: 'error',
      from: { path: folder('llm/orchestrator') },
      to: { path: folder('llm/gateway') },
    },
    {
      name: 'llm-shared-knows-no-side',
      comment: 'llm/protocol/ and llm/ledger.ts are shared by both sides, so they import neither.',
      severity: 'error',
      from: { path: ['^src/llm/[^/]+$', folder('llm/protocol')] },
      to: { path: ['^src/llm/gateway/', '^src/llm/orchestrator/'] },
    },
    {
      name: 'engines-know-domain-types-only',
      comment:
        'An engine (and the Engine interface) sees the domain types of llm/protocol/types.ts, never the wire: request schemas, chunks, capabilities and transport belong to the routes (issue #26).',
      severity: 'error',
      from: { path: ['^src/llm/orchestrator/engines/', '^src/llm/orchestrator/engine\\.ts$'] },
      to: { path: folder('llm/protocol'), pathNot: '^src/llm/protocol/types\\.ts$' },
    },
    {
      name: 'openai-wire-knows-no-side',
      comment:
        'llm/openai-wire/ reads the OpenAI wire for the gateway (its orchestrators) and the vLLM engine alike (issue #26), so it imports neither side.',
      severity: 'error',
      from: { path: folder('llm/openai-wire') },
      to: { path: ['^src/llm/gateway/', '^src/llm/orchestrator/'] },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import that resolves to nothing is a typo or a missing dependency.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'not-to-dev-dep',
      comment: 'src/ runs in production, where devDependencies are not installed.',
      severity: 'error',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports are dependencies too: a cycle of `import type` is still two folders
    // that know each other.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json', '.d.ts'],
    },
    reporterOptions: {
      text: { highlightFocused: true },
    },
  },
};
