// A download that survives being cut and never installs bytes it has not verified: the bytes go
// to `<file>.part`; a cut download goes on from the end of the .part (HTTP Range), in the same
// run after a short wait or in the next one; the whole .part is checked against the size and
// sha256 the hub gave before it is renamed into place. A .part whose bytes do not match is
// removed, so the next try starts over instead of resuming on bad bytes.

import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { finished, pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { backoffMs } from '../../lib/backoff.ts';
import { MediaplaneError, UpstreamFailedError, UpstreamUnavailableError } from '../../lib/errors.ts';
import { causeText, type OpenedFile } from './hub.ts';

export type DownloadEvent =
  /** Bytes start to flow; `from` > 0 when the .part of an earlier try is resumed. */
  | { type: 'start'; from: number; size: number | undefined }
  | { type: 'bytes'; done: number; size: number | undefined }
  /** The download was cut; it goes on from `done` after `inMs`. */
  | { type: 'retry'; done: number; reason: string; inMs: number }
  /** Every byte is here; `sha256` is what it is checked against (undefined: the size only). */
  | { type: 'verifying'; sha256: string | undefined };

export interface DownloadOptions {
  /** The file's name, for messages. */
  name: string;
  /** Where the verified file goes; its bytes gather in `${target}.part` first. */
  target: string;
  /** The bytes from an offset on (hub.ts: openHubFile). */
  open(offset: number): Promise<OpenedFile>;
  /** What the hub's listing says of the file. */
  expected: { size?: number | undefined; sha256?: string | undefined };
  /** Tries in one call, the first included (a cut download is resumed this many times less one). */
  attempts?: number;
  /** The wait after the first cut, doubling after each further one. */
  retryBaseMs?: number;
  onEvent?: ((e: DownloadEvent) => void) | undefined;
  signal?: AbortSignal | undefined;
}

const DEFAULT_ATTEMPTS = 5;

/** Bytes in a file, 0 when it is absent. */
async function sizeOf(path: string): Promise<number> {
  return (await stat(path).catch(() => undefined))?.size ?? 0;
}

/** Downloads, verifies and installs one file; resolves once it is at `target`. */
export async function downloadVerified(o: DownloadOptions): Promise<void> {
  const part = `${o.target}.part`;
  const attempts = o.attempts ?? DEFAULT_ATTEMPTS;
  const expected = { ...o.expected };
  for (let attempt = 1; ; attempt++) {
    try {
      await oneAttempt(o, part, expected);
      break;
    } catch (err) {
      // Only what a later try can change is tried again: the network, a 5xx, a short body.
      const resumable = err instanceof UpstreamUnavailableError || !(err instanceof MediaplaneError);
      if (!resumable || attempt >= attempts || o.signal?.aborted) throw asUnavailable(err, o.name);
      const inMs = backoffMs(attempt - 1, { baseMs: o.retryBaseMs ?? 1000, maxMs: 30_000, jitter: [0.75, 1.25] });
      o.onEvent?.({ type: 'retry', done: await sizeOf(part), reason: causeText(err), inMs });
      await sleep(inMs, undefined, o.signal ? { signal: o.signal } : {});
    }
  }
  await verifyAndInstall(o, part, expected);
}

function asUnavailable(err: unknown, name: string): unknown {
  if (err instanceof MediaplaneError || (err instanceof Error && err.name === 'AbortError')) return err;
  return new UpstreamUnavailableError(`the download of ${name} broke off (${causeText(err)})`, { cause: err });
}

/** One request: the bytes after the .part's end appended to it. */
async function oneAttempt(
  o: DownloadOptions,
  part: string,
  expected: { size?: number | undefined; sha256?: string | undefined },
): Promise<void> {
  let from = await sizeOf(part);
  if (expected.size !== undefined && from > expected.size) {
    await rm(part, { force: true });
    from = 0;
  }
  // Every byte is already here (a run cut while verifying): nothing to ask for.
  if (expected.size !== undefined && from === expected.size) return;
  const file = await o.open(from);
  adoptLinkedSha256(expected, file.linkedSha256, o.name);
  expected.size ??= file.size;
  // A server that ignores Range sends the whole file (200): it replaces the .part.
  if (file.start === 0) from = 0;
  o.onEvent?.({ type: 'start', from, size: expected.size });
  let done = from;
  await appendAll(file.body, { path: part, append: from > 0, signal: o.signal }, (bytes) => {
    done += bytes;
    o.onEvent?.({ type: 'bytes', done, size: expected.size });
  });
  const got = await sizeOf(part);
  if (expected.size !== undefined && got < expected.size)
    throw new UpstreamUnavailableError(`the download of ${o.name} ended at ${got} of ${expected.size} bytes`);
}

/**
 * Writes a body to a file, and when the body breaks off, still ends the file with every byte
 * that came (pipeline() would destroy the file stream and drop what it had not yet written:
 * bytes a resume would then fetch again).
 */
async function appendAll(
  body: ReadableStream<Uint8Array>,
  to: { path: string; append: boolean; signal?: AbortSignal | undefined },
  onBytes: (n: number) => void,
): Promise<void> {
  const out = createWriteStream(to.path, { flags: to.append ? 'a' : 'w' });
  try {
    for await (const chunk of Readable.fromWeb(
      body as WebReadableStream<Uint8Array>,
      to.signal ? { signal: to.signal } : {},
    )) {
      const bytes = chunk as Buffer;
      if (!out.write(bytes)) await once(out, 'drain');
      onBytes(bytes.length);
    }
  } finally {
    out.end();
    await finished(out);
  }
}

/** The listing's sha256 and the redirect's must agree; either alone is taken. */
function adoptLinkedSha256(expected: { sha256?: string | undefined }, linked: string | undefined, name: string): void {
  if (!linked) return;
  if (expected.sha256 && expected.sha256 !== linked)
    throw new UpstreamFailedError(
      `the model hub gives two checksums for ${name} (sha256 ${expected.sha256} in its listing, ${linked} in its download link): not downloaded`,
    );
  expected.sha256 = linked;
}

async function verifyAndInstall(
  o: DownloadOptions,
  part: string,
  expected: { size?: number | undefined; sha256?: string | undefined },
): Promise<void> {
  o.onEvent?.({ type: 'verifying', sha256: expected.sha256 });
  const hash = createHash('sha256');
  let size = 0;
  await pipeline(createReadStream(part), async (chunks: AsyncIterable<Buffer>) => {
    for await (const c of chunks) {
      hash.update(c);
      size += c.length;
    }
  });
  const sha256 = hash.digest('hex');
  const wrong =
    expected.size !== undefined && size !== expected.size
      ? `size mismatch: ${size} bytes, the hub says ${expected.size}`
      : expected.sha256 && sha256 !== expected.sha256
        ? `sha256 mismatch: got ${sha256}, the hub says ${expected.sha256}`
        : undefined;
  if (wrong) {
    await rm(part, { force: true });
    throw new UpstreamFailedError(
      `${o.name} failed verification (${wrong}): it was not installed, and the partial download was removed so that the next try starts over`,
    );
  }
  await rename(part, o.target);
}
