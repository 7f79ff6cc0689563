import { defineSettings } from './types.ts';
import { transcodeSettings } from './transcode.ts';
import { storageSettings } from './storage.ts';
import { gatewaySettings } from './gateway.ts';
import { orchestratorSettings } from './orchestrator.ts';
import { dwebSettings } from './dweb.ts';
import { c2paSettings } from './c2pa.ts';
import { webhookSettings } from './webhooks.ts';
import { assetSettings } from './assets.ts';
import { accessSettings } from './access.ts';
import { usageSettings } from './usage.ts';
import { limitSettings } from './limits.ts';
import { liveSettings } from './live.ts';

// Every setting the service reads, in one table per domain: name, type, default, description
// (STYLE.md, practice 2). `--help` and the README's settings table are generated from it.

const coreSettings = defineSettings({
  host: {
    env: 'MEDIAPLANE_HOST',
    type: 'string',
    group: 'server',
    default: '127.0.0.1',
    description: 'Address the HTTP server listens on (0.0.0.0 for every interface).',
  },
  port: {
    env: 'MEDIAPLANE_PORT',
    type: 'int',
    group: 'server',
    default: 8080,
    min: 0,
    max: 65535,
    description: 'HTTP port of the API, gateway and orchestrator in `start`; 0 picks a free one.',
  },
  dataDir: {
    env: 'MEDIAPLANE_DATA_DIR',
    type: 'string',
    group: 'server',
    default: './data',
    description: 'Directory for the embedded database, scratch files and the service identity.',
  },
  logLevel: {
    env: 'MEDIAPLANE_LOG_LEVEL',
    type: 'enum',
    group: 'server',
    default: 'info',
    values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const,
    description:
      "Log level of the logs on stdout. At info, every request is one line (a refusal with its reason), except those of probes, players and the console's page and files (/healthz, /readyz, /metrics, /media/, /, /assets/): their server errors alone are logged; debug logs them all.",
  },
  logFormat: {
    env: 'MEDIAPLANE_LOG_FORMAT',
    type: 'enum',
    group: 'server',
    default: 'auto',
    values: ['auto', 'json', 'pretty'] as const,
    description:
      'How logs are written on stdout: `json`, one object a line (for log collectors); `pretty`, human-readable lines (pino-pretty) after a start-up banner; `auto`, pretty on a terminal and JSON otherwise.',
  },
  bodyLimitBytes: {
    env: 'MEDIAPLANE_BODY_LIMIT_BYTES',
    type: 'int',
    group: 'server',
    default: 1_048_576,
    min: 1024,
    description: 'Largest request body accepted (413 above it).',
  },
  // A body nested 100,000 deep was a 500. 128 is above every legitimate body: a
  // structured-output schema as deep as the llama.cpp grammar accepts (64 levels of schema,
  // engines/llamacpp/json-schema/) plus the few levels of the chat body around it, where OpenAI's
  // structured outputs allow 10 levels of nesting; and far below what overflows a recursive walk.
  bodyMaxDepth: {
    env: 'MEDIAPLANE_BODY_MAX_DEPTH',
    type: 'int',
    group: 'server',
    default: 128,
    min: 16,
    max: 1000,
    description:
      'Deepest nesting of objects and arrays in a JSON request body, checked before it is parsed (400 above it).',
  },
  requestTimeoutMs: {
    env: 'MEDIAPLANE_REQUEST_TIMEOUT_MS',
    type: 'int',
    group: 'server',
    default: 30_000,
    min: 100,
    max: 3_600_000,
    description:
      'A request whose headers have not arrived by then, or whose body has not arrived by then after them, is answered 408 and its connection closed (slow-client guard); answers that take longer, such as streamed text, are not cut. Upload bodies are exempt: MEDIAPLANE_UPLOAD_IDLE_TIMEOUT_MS bounds them instead.',
  },
  keepAliveTimeoutMs: {
    env: 'MEDIAPLANE_KEEP_ALIVE_TIMEOUT_MS',
    type: 'int',
    group: 'server',
    default: 72_000,
    min: 100,
    max: 3_600_000,
    description:
      'How long an idle keep-alive connection is kept open; above the idle timeout of a load balancer in front (60 s on common ones), so it never reuses a socket the server is closing.',
  },
  publicUrl: {
    env: 'MEDIAPLANE_PUBLIC_URL',
    type: 'string',
    group: 'server',
    default: undefined,
    defaultText: '(unset: links are relative)',
    description:
      "The base URL clients reach the API at (https://media.example.com), used for absolute links such as the task list's Link header; never taken from the request's Host header.",
  },
  shutdownGraceMs: {
    env: 'MEDIAPLANE_SHUTDOWN_GRACE_MS',
    type: 'int',
    group: 'server',
    default: 30_000,
    min: 0,
    description: 'On SIGTERM, how long running jobs may finish before they are released to other workers.',
  },
  requesterSalt: {
    env: 'MEDIAPLANE_REQUESTER_SALT',
    type: 'string',
    group: 'server',
    default: undefined,
    defaultText: 'random, kept in the data dir',
    secret: true,
    description: 'Salt of the requesterId hash of client IPs.',
  },

  databaseUrl: {
    env: 'DATABASE_URL',
    type: 'string',
    group: 'database',
    default: undefined,
    defaultText: 'embedded PGlite in the data dir',
    secret: true,
    description: 'PostgreSQL connection string; several processes can share one server.',
  },
  databasePoolSize: {
    env: 'MEDIAPLANE_DATABASE_POOL_SIZE',
    type: 'int',
    group: 'database',
    default: 10,
    min: 1,
    max: 1000,
    description: 'Connections per process to a PostgreSQL server.',
  },

  workerConcurrency: {
    env: 'MEDIAPLANE_WORKER_CONCURRENCY',
    type: 'int',
    group: 'tasks',
    default: 1,
    min: 1,
    max: 256,
    description: 'Jobs one worker process runs at once.',
  },
  maxQueuedPerOwner: {
    env: 'MEDIAPLANE_MAX_QUEUED_PER_OWNER',
    type: 'int',
    group: 'tasks',
    default: 100,
    min: 1,
    description: 'Tasks an owner may have waiting or running; more answer 429.',
  },
  maxRetries: {
    env: 'MEDIAPLANE_MAX_RETRIES',
    type: 'int',
    group: 'tasks',
    default: 3,
    min: 0,
    max: 100,
    description:
      'Automatic retries of a job after a retryable failure (storage or input unreachable, a timeout); runs lost to a crashed worker count apart (MEDIAPLANE_MAX_CRASH_RETRIES).',
  },
  maxCrashRetries: {
    env: 'MEDIAPLANE_MAX_CRASH_RETRIES',
    type: 'int',
    group: 'tasks',
    default: 5,
    min: 0,
    max: 100,
    description:
      'Times a task is taken back from a worker that stopped heartbeating (killed, crashed, cut off) before it fails. A task taken back runs first, so a burst of worker deaths falls on the same few tasks; a task that brings down every worker that runs it stops here.',
  },
  leaseMs: {
    env: 'MEDIAPLANE_LEASE_MS',
    type: 'int',
    group: 'tasks',
    default: 60_000,
    min: 200,
    description:
      'How long a claimed job stays with its worker without a heartbeat; a worker that cannot renew it stops the job before it runs out, so a reclaimed task never runs twice at once.',
  },
  heartbeatMs: {
    env: 'MEDIAPLANE_HEARTBEAT_MS',
    type: 'int',
    group: 'tasks',
    default: 10_000,
    min: 50,
    description: 'How often a running job renews its lease (must be under the lease).',
  },
  pollMs: {
    env: 'MEDIAPLANE_POLL_MS',
    type: 'int',
    group: 'tasks',
    default: 1000,
    min: 10,
    description: 'How often an idle worker looks for work.',
  },
  retryBackoffMs: {
    env: 'MEDIAPLANE_RETRY_BACKOFF_MS',
    type: 'int',
    group: 'tasks',
    default: 15_000,
    min: 0,
    description:
      'Delay before the first retry after a failure; doubles with each further retry, +-25% jitter. With the defaults a 30 s storage outage costs at most 2 retries, a 60 s one at most 3.',
  },
  retryBackoffMaxMs: {
    env: 'MEDIAPLANE_RETRY_BACKOFF_MAX_MS',
    type: 'int',
    group: 'tasks',
    default: 300_000,
    min: 0,
    description: 'Longest delay before a retry (before jitter), however many retries came before.',
  },
  taskProgressEventMs: {
    env: 'MEDIAPLANE_TASK_PROGRESS_EVENT_MS',
    type: 'int',
    group: 'tasks',
    default: 3000,
    min: 0,
    max: 3_600_000,
    description:
      "Progress of a running task becomes a `task.updated` webhook event at most this often (the first of each run always); the task's event stream shows every progress write.",
  },
  maxEventStreamsPerOwner: {
    env: 'MEDIAPLANE_MAX_EVENT_STREAMS_PER_OWNER',
    type: 'int',
    group: 'tasks',
    default: 32,
    min: 1,
    max: 100_000,
    description:
      'Task event streams (GET /api/task/{id}/events) an owner may have open at once on one API process; more answer 429. `mediaplane tasks watch` holds one, a browser a few.',
  },
  idempotencyMaxWaiters: {
    env: 'MEDIAPLANE_IDEMPOTENCY_MAX_WAITERS',
    type: 'int',
    group: 'tasks',
    default: 8,
    min: 1,
    max: 10_000,
    description:
      'Requests that may wait on one API process for the answer of an Idempotency-Key still in flight; more answer 409 with Retry-After at once.',
  },
  taskEventsRetentionMs: {
    env: 'MEDIAPLANE_TASK_EVENTS_RETENTION_MS',
    type: 'int',
    group: 'tasks',
    default: 7 * 86_400_000,
    min: 60_000,
    description:
      'How long task events and finished webhook deliveries are kept; an event not yet fanned out to webhooks, or a delivery not yet made or given up, is kept until it is, and a delivery as long as its log.',
  },
  webhookLogRetentionMs: {
    env: 'MEDIAPLANE_WEBHOOK_LOG_RETENTION_MS',
    type: 'int',
    group: 'tasks',
    default: 30 * 86_400_000,
    min: 60_000,
    description: 'How long webhook delivery attempts are kept (GET /api/webhook/{id}/log).',
  },
  apiKey: {
    env: 'MEDIAPLANE_API_KEY',
    type: 'string',
    group: 'tasks',
    default: undefined,
    defaultText: '(unset)',
    secret: true,
    description: 'The API key `mediaplane tasks watch` sends when --key is not given; the server does not read it.',
  },
  authCacheMs: {
    env: 'MEDIAPLANE_AUTH_CACHE_MS',
    type: 'int',
    group: 'server',
    default: 2000,
    min: 0,
    max: 600_000,
    description:
      'How long a checked API key is reused without a database lookup; a key revoked by another process works up to this long (0: look up every request).',
  },
  allowPrivateUrls: {
    env: 'MEDIAPLANE_ALLOW_PRIVATE_URLS',
    type: 'bool',
    group: 'tasks',
    default: false,
    description: 'Let inputs and storage endpoints on loopback/private addresses through (local set-ups, tests).',
  },
});

// Each domain declares its own settings in a file of this folder, so a new domain adds a
// file and one line here.
export const settings = {
  ...coreSettings,
  ...transcodeSettings,
  ...storageSettings,
  ...gatewaySettings,
  ...orchestratorSettings,
  ...dwebSettings,
  ...c2paSettings,
  ...webhookSettings,
  ...assetSettings,
  ...accessSettings,
  ...usageSettings,
  ...limitSettings,
  ...liveSettings,
};

export type Settings = typeof settings;
export type SettingKey = keyof Settings;

type ValueOf<S> = S extends { type: 'int' | 'number' }
  ? number
  : S extends { type: 'bool' }
    ? boolean
    : S extends { type: 'list' }
      ? string[]
      : S extends { type: 'enum'; values: readonly (infer V)[] }
        ? V
        : S extends { default: string }
          ? string
          : string | undefined;

export type Config = { readonly [K in SettingKey]: ValueOf<Settings[K]> };
