// What api.ts's ApiError leaves out and two pages need: the `Retry-After` of a 429 or 503
// (POST /api/webhook/{id}/log/{logId}/resend, the chat route when every orchestrator is busy)
// and the LLM error's `param` (the field it names, so the words sit next to that field).
// Same key, same error words as api.ts; only the answer's headers and `param` are kept too.

import { ApiError, apiKey, errorWords } from './api.ts';

export interface ErrorDetail {
  /** Seconds to wait, from `Retry-After` (seconds or an HTTP date). */
  retryAfterS?: number;
  /** The LLM error's `param`: the request field it is about (`max_tokens`, `response_format...`). */
  param?: string;
}

/** An ApiError with the answer's Retry-After and the field the error names. */
export class DetailedApiError extends ApiError {
  constructor(
    status: number,
    messages: string[],
    readonly detail: ErrorDetail,
  ) {
    super(status, messages);
    this.name = 'DetailedApiError';
  }
}

/** Seconds from a Retry-After header: delta-seconds or an HTTP date (RFC 9110 section 10.2.3). */
export function retryAfterSeconds(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

function paramOf(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const error = (body as { error?: unknown }).error;
  if (typeof error !== 'object' || error === null) return undefined;
  const param = (error as { param?: unknown }).param;
  return typeof param === 'string' ? param : undefined;
}

/** A call with the key; a 2xx Response, else a DetailedApiError in the API's own words. */
export async function fetchDetailed(
  method: string,
  path: string,
  opts: { body?: unknown; signal?: AbortSignal } = {},
): Promise<Response> {
  const headers: Record<string, string> = {};
  const key = apiKey();
  if (key) headers.authorization = `Bearer ${key}`;
  const init: RequestInit = { method, headers };
  if (opts.body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(opts.body);
  }
  if (opts.signal) init.signal = opts.signal;
  let res: Response;
  try {
    res = await fetch(path, init);
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new DetailedApiError(0, [`the service did not answer (${(e as Error).message})`], {});
  }
  if (res.ok) return res;
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const words = errorWords(body);
  if (words.length === 0) words.push(text.trim().slice(0, 500) || `${res.status} ${res.statusText}`);
  const detail: ErrorDetail = {};
  const wait = retryAfterSeconds(res.headers.get('retry-after'));
  if (wait !== undefined) detail.retryAfterS = wait;
  const param = paramOf(body);
  if (param !== undefined) detail.param = param;
  throw new DetailedApiError(res.status, words, detail);
}

/** The words to show for an error, with "try again in N s" when the API said when. */
export function withRetryAfter(error: unknown): unknown {
  if (!(error instanceof DetailedApiError) || error.detail.retryAfterS === undefined) return error;
  const s = error.detail.retryAfterS;
  return new ApiError(error.status, [...error.messages, `Try again in ${s} second${s === 1 ? '' : 's'}.`]);
}
