import type { Accounts } from './accounts/index.ts';
import type { AssetStore } from './assets/index.ts';
import type { Config } from './config/index.ts';
import type { Db } from './db/index.ts';
import type { Logger } from './lib/log.ts';
import type { BuiltinStore } from './storage/builtin/index.ts';
import type { AgentSigner } from './storage/dweb/index.ts';
import type { Queue, TaskStore } from './tasks/index.ts';
import type { C2paSigner } from './transcode/index.ts';
import type { WebhookStore } from './webhooks/index.ts';

// The service's core as main.ts opens it: one type that main.ts builds and main-api.ts and
// the worker read, so the two sides of the composition root cannot drift apart.

export interface Core {
  config: Config;
  log: Logger;
  db: Db;
  accounts: Accounts;
  tasks: TaskStore;
  queue: Queue;
  webhooks: WebhookStore;
  /** The built-in store: assets, and transcodes that name no storage. */
  builtinStore: BuiltinStore;
  assets: AssetStore;
  /** The service's UCAN identity users delegate their Storacha space to. */
  agent: AgentSigner;
  /** Undefined when C2PA signing is not configured. */
  c2paSigner: C2paSigner | undefined;
}
