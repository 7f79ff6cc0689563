import { FileCache } from './file-cache.ts';

// Requests from a viewer's node to the node holding a stream (its internal routes), shared:
// one upstream request per distinct URL in flight however many viewers wait for it (a
// blocking playlist reload with the same _HLS_msn/_HLS_part, a hinted part), and immutable
// files answered from a small cache afterwards. A viewer that goes away stops waiting; the
// shared request goes on for the others (the holder's hold limit bounds it).

export interface UpstreamAnswer {
  status: number;
  body: Buffer;
  /** The holder's reason for a refusal (its error body), or why it could not be asked. */
  reason?: string | undefined;
}

export interface UpstreamOptions {
  /** The cluster's shared secret, sent as a bearer token. */
  secret: string;
  /** Called once per request actually sent (the metric). */
  onRequest?: () => void;
  /** Bytes of immutable files kept (default 64 MB). */
  cacheBytes?: number;
  /**
   * Longest wait for a holder's answer (default 20 s): a blocking reload is held three target
   * durations at most there (18 s with the longest segments, MEDIAPLANE_LIVE_SEGMENT_SECS=6).
   */
  timeoutMs?: number;
}

const EMPTY = Buffer.alloc(0);

export class Upstream {
  readonly #o: UpstreamOptions;
  readonly #inFlight = new Map<string, Promise<UpstreamAnswer>>();
  readonly #files: FileCache;

  constructor(o: UpstreamOptions) {
    this.#o = o;
    this.#files = new FileCache({ maxBytes: o.cacheBytes ?? 64 * 1024 * 1024 });
  }

  /** GET `url`; `immutable`: a file whose bytes never change under its name (kept once fetched whole). */
  async get(url: string, o: { immutable: boolean; signal?: AbortSignal | undefined }): Promise<UpstreamAnswer> {
    const kept = o.immutable ? this.#files.get(url) : undefined;
    if (kept !== undefined) return { status: 200, body: kept };
    let shared = this.#inFlight.get(url);
    if (shared === undefined) {
      shared = this.#send(url, o.immutable).finally(() => this.#inFlight.delete(url));
      this.#inFlight.set(url, shared);
    }
    return o.signal ? untilAborted(shared, o.signal) : shared;
  }

  async #send(url: string, immutable: boolean): Promise<UpstreamAnswer> {
    this.#o.onRequest?.();
    try {
      const res = await fetch(url, {
        headers: { authorization: `Bearer ${this.#o.secret}` },
        signal: AbortSignal.timeout(this.#o.timeoutMs ?? 20_000),
      });
      const body = Buffer.from(await res.arrayBuffer());
      if (res.status === 200) {
        if (immutable) this.#files.set(url, body);
        return { status: 200, body };
      }
      return { status: res.status, body: EMPTY, reason: reasonOf(body) };
    } catch (err) {
      // The holder went away (killed, its lease not yet expired) or did not answer in time.
      return { status: 502, body: EMPTY, reason: `the node holding this stream did not answer (${errorName(err)})` };
    }
  }
}

/** The first error of the holder's `{errors: [...]}` body. */
function reasonOf(body: Buffer): string | undefined {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { errors?: unknown };
    const first = Array.isArray(parsed.errors) ? parsed.errors[0] : undefined;
    return typeof first === 'string' ? first : undefined;
  } catch {
    return undefined;
  }
}

function errorName(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown } }).cause?.code;
  if (typeof cause === 'string') return cause;
  return err instanceof Error ? err.name : 'error';
}

function untilAborted(answer: Promise<UpstreamAnswer>, signal: AbortSignal): Promise<UpstreamAnswer> {
  if (signal.aborted) return Promise.resolve(aborted());
  return new Promise((resolve) => {
    const onAbort = () => resolve(aborted());
    signal.addEventListener('abort', onAbort, { once: true });
    void answer.then((a) => {
      signal.removeEventListener('abort', onAbort);
      resolve(a);
    });
  });
}

const aborted = (): UpstreamAnswer => ({ status: 503, body: EMPTY, reason: 'the request was aborted' });
