import type { Config } from '../config/index.ts';
import { UsageError, type ParsedArgs } from './args.ts';

// What the commands that are clients of the API share (tasks watch, sample): where the server
// is, and how its refusals and a failed connection read on a terminal.

/** The server's base URL from --url, else this machine at MEDIAPLANE_PORT; without a trailing `/api` (the flag may name the API's). */
export function apiBaseUrl(args: ParsedArgs, config: Config): string {
  const given = stringFlag(args, 'url');
  if (given === undefined && config.port === 0)
    throw new UsageError('MEDIAPLANE_PORT is 0 (any free port): give the server with --url');
  const raw = given ?? `http://127.0.0.1:${config.port}`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--url: ${JSON.stringify(raw)} is not a URL (http://HOST:PORT)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('--url: must be an http(s) URL');
  return url
    .toString()
    .replace(/\/+$/, '')
    .replace(/\/api$/, '');
}

/** The API's error message(s) of a refused request, `{"errors": [...]}`, or its status. */
export async function errorsOf(res: Response): Promise<string> {
  const text = await res.text().catch(() => '');
  return `the API answered ${res.status}: ${messagesOf(text) || res.statusText}`;
}

export function messagesOf(json: string): string {
  try {
    const body = JSON.parse(json) as { errors?: unknown };
    if (Array.isArray(body.errors)) return body.errors.map(String).join('\n');
  } catch {}
  return '';
}

/** Why a fetch failed: undici's TypeError says only "fetch failed", its cause says why. */
export function causeOf(e: unknown): string {
  const cause = e instanceof Error && e.cause instanceof Error ? e.cause : e;
  return cause instanceof Error ? cause.message : String(cause);
}

export function stringFlag(args: ParsedArgs, name: string): string | undefined {
  const v = args.flags[name];
  return typeof v === 'string' ? v : undefined;
}
