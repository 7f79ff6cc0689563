// `mediaplane tasks watch ID`: follows a task's event stream (GET /api/task/{id}/events,
// issue #18) and draws its progress. A client of the API like any other: it sends an API key
// over HTTP and reads the Task as the wire shows it, so it works against a remote server.

import type { WireTask } from '../api/contract/index.ts';
import type { Config } from '../config/index.ts';
import { parseSse } from '../lib/sse.ts';
import { apiBaseUrl, causeOf, errorsOf, messagesOf, stringFlag } from './api-client.ts';
import { UsageError, type CommandFlags, type ParsedArgs } from './args.ts';

export const TASKS_HELP = `Usage:
  ./mediaplane tasks watch TASK_ID [--url URL] [--key KEY]

Follows a task as it runs and draws its progress: a bar on a terminal, a line per change
otherwise. Exits 0 when the task completes (printing where its outputs are), 1 when it
fails (printing why) or is cancelled, 2 on a usage error.

  --url URL   the server's base URL (default http://127.0.0.1:MEDIAPLANE_PORT, that is 8080 unset)
  --key KEY   an API key of the task's owner (default MEDIAPLANE_API_KEY)`;

export const TASKS_FLAGS: CommandFlags = { url: { type: 'string' }, key: { type: 'string' } };

interface Out {
  write(s: string): unknown;
  isTTY?: boolean;
}

export interface TasksDeps {
  config: Config;
  stdout?: Out;
  stderr?: Out;
}

const BAR_WIDTH = 10;

/** Runs `tasks ...` as the command line parsed it (cli/index.ts); resolves to the exit code. */
export async function tasksCommand(args: ParsedArgs, deps: TasksDeps): Promise<number> {
  const [sub, id, ...extra] = args.positionals;
  if (sub !== 'watch') throw new UsageError(`tasks needs watch TASK_ID\n\n${TASKS_HELP}`);
  if (!id || extra.length > 0) throw new UsageError(`tasks watch needs one task id\n\n${TASKS_HELP}`);
  const key = stringFlag(args, 'key') ?? deps.config.apiKey;
  if (!key) throw new UsageError('tasks watch needs an API key: --key KEY or MEDIAPLANE_API_KEY');
  return watch({ base: apiBaseUrl(args, deps.config), key, id }, deps);
}

async function watch(t: { base: string; key: string; id: string }, deps: TasksDeps): Promise<number> {
  const err = deps.stderr ?? process.stderr;
  const url = `${t.base}/api/task/${encodeURIComponent(t.id)}/events`;
  let res: Response;
  try {
    res = await fetch(url, { headers: { authorization: `Bearer ${t.key}`, accept: 'text/event-stream' } });
  } catch (e) {
    err.write(`cannot reach the API at ${t.base}: ${causeOf(e)}\n`);
    return 1;
  }
  if (res.status !== 200 || !res.body) {
    err.write(`${await errorsOf(res)}\n`);
    return 1;
  }
  const bar = new ProgressLine(deps.stdout ?? process.stdout);
  let last: WireTask | undefined;
  try {
    for await (const ev of parseSse(res.body)) {
      if (ev.event === 'error') {
        bar.end();
        err.write(`${messagesOf(ev.data)}\n`);
        return 1;
      }
      if (ev.event !== 'task') continue;
      last = JSON.parse(ev.data) as WireTask;
      bar.show(barText(last));
    }
  } catch (e) {
    bar.end();
    err.write(`the event stream broke: ${causeOf(e)}\n`);
    return 1;
  }
  bar.end();
  return finished(last, deps);
}

/** The exit code for the last state the stream showed, with what the user needs to know. */
function finished(task: WireTask | undefined, deps: TasksDeps): number {
  const out = deps.stdout ?? process.stdout;
  const err = deps.stderr ?? process.stderr;
  switch (task?.status.phase) {
    case 'completed':
      for (const [kind, where] of outputLocations(task)) out.write(`${kind.padEnd(5)} ${where}\n`);
      return 0;
    case 'failed':
      err.write(`task ${task.id} failed: ${task.status.errorMessage ?? 'no reason given'}\n`);
      return 1;
    case 'cancelled':
      err.write(`task ${task.id} was cancelled\n`);
      return 1;
    default:
      err.write(`the event stream ended before the task did (last phase: ${task?.status.phase ?? 'none'})\n`);
      return 1;
  }
}

function barText(task: WireTask): string {
  const fraction = Math.min(1, Math.max(0, task.status.progress ?? 0));
  // Rounded down, so a running task never shows a full bar or 100% before it completes.
  const filled = Math.floor(fraction * BAR_WIDTH);
  const bar = `${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}`;
  return `[${bar}] ${String(Math.floor(fraction * 100)).padStart(3)}% ${task.status.phase}`;
}

/**
 * One line redrawn in place on a terminal; elsewhere (a pipe, a log file, CI) a line for each
 * change, so the output reads as a log.
 */
class ProgressLine {
  readonly #out: Out;
  #shown = '';
  constructor(out: Out) {
    this.#out = out;
  }

  show(text: string): void {
    if (text === this.#shown) return;
    this.#out.write(this.#out.isTTY ? `\r\x1b[2K${text}` : `${text}\n`);
    this.#shown = text;
  }

  end(): void {
    if (this.#out.isTTY && this.#shown) this.#out.write('\n');
    this.#shown = '';
  }
}

/**
 * Where a completed task's main outputs are: the playlists and the MP4s, as URLs where the
 * storage makes one (an S3 endpoint and bucket, a decentralized storage's base URL), else as
 * paths in the storage.
 */
function outputLocations(task: WireTask): Array<[string, string]> {
  const out = (task.output?.transcodeFile ?? {}) as {
    baseUrl?: string;
    hls?: { path?: string };
    fmp4?: { path?: string };
    mp4?: Array<{ path?: string }>;
  };
  const storage = (task.params['transcode-file'] as { storage?: { type?: string; endpoint?: string; bucket?: string } })
    ?.storage;
  const at = (path: string): string => {
    if (out.baseUrl) return `${out.baseUrl.replace(/\/+$/, '')}${path}`;
    if (storage?.type === 's3' && storage.endpoint && storage.bucket)
      return `${storage.endpoint.replace(/\/+$/, '')}/${storage.bucket}${path}`;
    return path;
  };
  const found: Array<[string, string]> = [];
  if (out.hls?.path) found.push(['hls', at(out.hls.path)]);
  if (out.fmp4?.path) found.push(['fmp4', at(out.fmp4.path)]);
  for (const m of out.mp4 ?? []) if (m.path) found.push(['mp4', at(m.path)]);
  return found;
}
