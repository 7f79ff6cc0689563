// A node:test reporter beside the spec reporter (scripts/test.ts): each test file's wall time,
// from the runner's own event for the whole file, and the run's counts, written as JSON lines to
// its destination, so the suite can say where its minutes go and close on one line for both turns.

interface TestEvent {
  type: string;
  data: {
    nesting?: number;
    file?: string;
    details?: { duration_ms?: number };
    counts?: { passed: number; failed: number; skipped: number; cancelled: number; todo: number };
  };
}

export default async function* fileTimes(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const times = new Map<string, number>();
  for await (const e of source) {
    const { nesting, file, details, counts } = e.data ?? {};
    // The run's own summary (no file): its counts, for the suite's closing line.
    if (e.type === 'test:summary' && !file && counts) yield `${JSON.stringify({ counts })}\n`;
    if (e.type !== 'test:complete' || nesting !== 0 || !file || details?.duration_ms === undefined) continue;
    // The file's own event spans all its top-level tests, and its process's start.
    times.set(file, Math.max(times.get(file) ?? 0, details.duration_ms));
  }
  for (const [file, ms] of times) yield `${JSON.stringify({ file, ms })}\n`;
}
