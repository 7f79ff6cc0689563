import { UpstreamUnavailableError, ValidationError } from '../../lib/errors.ts';
import { openRangeReader, startRangeProxy, storedRangeReader, type RangeProxy } from '../../storage/index.ts';
import type { ChunkedDeps, SourceRef } from './types.ts';

/**
 * The input of a piece served to ffmpeg on 127.0.0.1 (storage/range-proxy.ts): the source
 * itself by ranges, or the copy the split step put in the built-in store. The split step
 * found the source answering ranges; one that stops now is worth another try.
 */
export async function openPieceSource(deps: ChunkedDeps, ref: SourceRef, signal: AbortSignal): Promise<RangeProxy> {
  if (ref.stored !== undefined) {
    if (!deps.builtinStore) throw new ValidationError('storage: this server has no built-in store for the pieces');
    return startRangeProxy(await storedRangeReader(deps.builtinStore, ref.stored));
  }
  const reader = await openRangeReader(ref.input, deps.config, signal);
  if (!reader) throw new UpstreamUnavailableError('the input no longer answers range requests; it will be tried again');
  return startRangeProxy(reader);
}

/** The proxy's upstream failure, when there was one, explains an ffmpeg that could not read. */
export function readFailure(proxy: RangeProxy, err: unknown): unknown {
  return proxy.error ?? err;
}
