// A read that many callers make of the same key, made at most once per `keepMs` per key:
// each viewer of a live stream asks a playlist and a part every quarter second, and each of
// their requests needs the same row. A read that fails is not kept (the next caller reads
// again). Bounded: a flood of made-up keys costs reads, not memory.

const MAX_KEPT = 10_000;

export function readAtMostEvery<T>(
  read: (key: string) => Promise<T>,
  o: { keepMs: number; now?: (() => number) | undefined },
): (key: string) => Promise<T> {
  const now = o.now ?? Date.now;
  const kept = new Map<string, { at: number; value: Promise<T> }>();
  return (key) => {
    const k = kept.get(key);
    if (k && now() - k.at < o.keepMs) return k.value;
    if (kept.size >= MAX_KEPT) kept.clear();
    const value = read(key);
    kept.set(key, { at: now(), value });
    value.catch(() => kept.delete(key));
    return value;
  };
}
