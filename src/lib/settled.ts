/**
 * Promise.all that waits for every branch before it throws the first failure: a branch
 * still running must not touch files (a scratch directory, say) after the caller cleaned up.
 */
export async function settledAll<T extends readonly unknown[]>(
  items: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.allSettled(items);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}
