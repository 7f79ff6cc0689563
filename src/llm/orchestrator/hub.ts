// The model hub's side of a download: which GGUF files a model has (with each one's size and
// sha256), which of them to take, and its bytes from an offset on. The hub's API is the public
// one of huggingface.co: GET /api/models/<id>?blobs=true lists `siblings[]` with `rfilename`,
// `size` and, for files kept in LFS (every GGUF), `lfs.sha256`; GET /<id>/resolve/main/<file>
// answers a redirect to a content server, the file's sha256 in that redirect's X-Linked-Etag
// header. A fetch that follows redirects never shows that header, so they are followed by hand.

import { NotFoundError, UpstreamFailedError, UpstreamUnavailableError } from '../../lib/errors.ts';

export interface HubFile {
  name: string;
  /** Bytes, when the hub says. */
  size?: number | undefined;
  /** Lower-case hex, when the hub says (LFS files). */
  sha256?: string | undefined;
}

/** The quantizations taken when none is asked for, best first: small and still good at chat. */
export const PREFERRED_QUANTIZATIONS = ['Q4_K_M', 'Q4_K_S', 'Q4_0', 'Q5_K_M', 'Q8_0', 'F16'];

/** Parts of a split GGUF (`model-00001-of-00003.gguf`): one model in several files. */
const SPLIT_PART = /-\d{5}-of-\d{5}\.gguf$/i;
const SHA256_HEX = /^[0-9a-f]{64}$/;

/** A GGUF file name of the hub that may become a file name here: no folder, no dot file. */
function isPlainGguf(name: string): boolean {
  return name.toLowerCase().endsWith('.gguf') && !/[/\\]/.test(name) && !name.startsWith('.');
}

/** Thrown by the hub client for answers a retry cannot change (404, 401, a bad listing). */
function notOnHub(id: string, base: string): NotFoundError {
  return new NotFoundError(`model ${id} is not on the model hub ${base} (or it needs a login, which is not supported)`);
}

/** The GGUF files of `id` on the hub (GET /api/models/<id>?blobs=true). */
export async function hubFiles(o: { base: string; id: string; signal?: AbortSignal | undefined }): Promise<HubFile[]> {
  let res: Response;
  try {
    res = await fetch(`${o.base}/api/models/${o.id}?blobs=true`, {
      signal: o.signal ?? AbortSignal.timeout(30_000),
      headers: { accept: 'application/json' },
    });
  } catch (err) {
    throw new UpstreamUnavailableError(`the model hub ${o.base} cannot be reached (${causeText(err)})`, { cause: err });
  }
  if (res.status === 404 || res.status === 401 || res.status === 403) throw notOnHub(o.id, o.base);
  if (!res.ok) throw new UpstreamUnavailableError(`the model hub ${o.base} answered ${res.status} for ${o.id}`);
  const info = (await res.json().catch(() => ({}))) as { siblings?: unknown };
  const siblings = Array.isArray(info.siblings) ? (info.siblings as Array<Record<string, unknown>>) : [];
  return siblings.flatMap((s) => {
    const name = s.rfilename;
    if (typeof name !== 'string' || !isPlainGguf(name)) return [];
    const lfs = (s.lfs ?? {}) as Record<string, unknown>;
    const sha = typeof lfs.sha256 === 'string' ? lfs.sha256.toLowerCase() : undefined;
    const size = typeof s.size === 'number' ? s.size : typeof lfs.size === 'number' ? lfs.size : undefined;
    return [{ name, size, sha256: sha && SHA256_HEX.test(sha) ? sha : undefined }];
  });
}

/**
 * The file to download: the one whose name holds `quantization` (case-insensitive), else Q8_0
 * when 8-bit was asked for, else the first of PREFERRED_QUANTIZATIONS the model has, else its
 * smallest file. Split GGUFs are left out: the engine loads one file.
 */
export function chooseHubFile(
  files: HubFile[],
  o: { id: string; quantization?: string | undefined; use8bit?: boolean },
): HubFile {
  const whole = files.filter((f) => !SPLIT_PART.test(f.name));
  const has = (q: string) => whole.filter((f) => f.name.toLowerCase().includes(q.toLowerCase()));
  const smallest = (list: HubFile[]) =>
    [...list].sort((a, b) => (a.size ?? Infinity) - (b.size ?? Infinity) || a.name.localeCompare(b.name))[0];
  if (o.quantization) {
    const found = smallest(has(o.quantization));
    if (found) return found;
    throw new NotFoundError(
      `model ${o.id} on the hub has no GGUF file matching ${o.quantization}; it has: ${whole.map((f) => f.name).join(', ') || 'none'}`,
    );
  }
  const order = o.use8bit ? ['Q8_0', ...PREFERRED_QUANTIZATIONS] : PREFERRED_QUANTIZATIONS;
  for (const q of order) {
    const found = smallest(has(q));
    if (found) return found;
  }
  const found = smallest(whole);
  if (found) return found;
  const split = files.length > 0 ? ' (only split GGUF files, which are not supported)' : '';
  throw new NotFoundError(`model ${o.id} on the hub has no GGUF file${split}`);
}

/** The bytes of a file from `offset` on, as the content server answered them. */
export interface OpenedFile {
  body: ReadableStream<Uint8Array>;
  /** Where the body starts in the file: `offset` for a 206, 0 when the server sent it all (200). */
  start: number;
  /** The file's size, when the answer tells it. */
  size?: number | undefined;
  /** The sha256 the hub's redirect named (X-Linked-Etag), when it did. */
  linkedSha256?: string | undefined;
}

const MAX_REDIRECTS = 5;

/** An ETag as the hub sends it (`"<hex>"`, maybe weak) as a sha256, or undefined when it is not one. */
function etagSha256(value: string | null): string | undefined {
  const v = value?.replace(/^W\//, '').replace(/"/g, '').toLowerCase();
  return v && SHA256_HEX.test(v) ? v : undefined;
}

/**
 * GET /<id>/resolve/main/<file> with `Range: bytes=<offset>-`, redirects followed by hand so
 * that the hub's X-Linked-Etag is seen. A 4xx is final (NotFoundError); a 5xx or a network error
 * is an UpstreamUnavailableError, which the caller may retry.
 */
export async function openHubFile(o: {
  base: string;
  id: string;
  file: string;
  offset: number;
  signal?: AbortSignal | undefined;
}): Promise<OpenedFile> {
  let url = `${o.base}/${o.id}/resolve/main/${encodeURIComponent(o.file)}`;
  let linkedSha256: string | undefined;
  const headers: Record<string, string> = o.offset > 0 ? { range: `bytes=${o.offset}-` } : {};
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    let res: Response;
    try {
      res = await fetch(url, { redirect: 'manual', headers, ...(o.signal ? { signal: o.signal } : {}) });
    } catch (err) {
      throw new UpstreamUnavailableError(`cannot download ${o.file} (${causeText(err)})`, { cause: err });
    }
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      linkedSha256 ??= etagSha256(res.headers.get('x-linked-etag'));
      await res.body?.cancel();
      url = new URL(location, url).toString();
      continue;
    }
    return opened(res, { ...o, linkedSha256 });
  }
  throw new UpstreamFailedError(`the model hub redirected ${o.file} more than ${MAX_REDIRECTS} times`);
}

function opened(res: Response, o: { file: string; offset: number; linkedSha256: string | undefined }): OpenedFile {
  if (res.status === 206 && res.body) {
    // Content-Range: bytes <first>-<last>/<size>
    const m = /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(res.headers.get('content-range') ?? '');
    if (!m || Number(m[1]) !== o.offset) {
      void res.body.cancel();
      throw new UpstreamFailedError(`the content server sent ${o.file} from another offset than ${o.offset} was asked`);
    }
    return {
      body: res.body,
      start: o.offset,
      size: m[2] === '*' ? undefined : Number(m[2]),
      linkedSha256: o.linkedSha256,
    };
  }
  if (res.status === 200 && res.body) {
    const length = Number(res.headers.get('content-length') ?? Number.NaN);
    return {
      body: res.body,
      start: 0,
      size: Number.isFinite(length) ? length : undefined,
      linkedSha256: o.linkedSha256,
    };
  }
  void res.body?.cancel();
  if (res.status === 416 && o.offset > 0) {
    // The .part already holds every byte (Content-Range: bytes */<size>): nothing left to send.
    const m = /^bytes \*\/(\d+)$/.exec(res.headers.get('content-range') ?? '');
    const empty = new ReadableStream<Uint8Array>({ start: (c) => c.close() });
    return { body: empty, start: o.offset, size: m ? Number(m[1]) : undefined, linkedSha256: o.linkedSha256 };
  }
  if (res.status >= 500 || res.status === 429)
    throw new UpstreamUnavailableError(`the content server answered ${res.status} for ${o.file}`);
  throw new NotFoundError(`the model hub answered ${res.status} for ${o.file}`);
}

export function causeText(err: unknown): string {
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  return cause instanceof Error ? cause.message : String(cause);
}
