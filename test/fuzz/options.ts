// How long the fuzz tests run, in one place: bounded in runs and time, FUZZ_RUNS for more runs,
// FUZZ_SEED to replay the seed a failure printed (fast-check prints it with the shrunk case).

/** fast-check's parameters: `runs` unless FUZZ_RUNS says, cut off after `timeLimitMs`, seeded by FUZZ_SEED when set. */
export function fuzzOptions(o: { runs: number; timeLimitMs: number }): {
  numRuns: number;
  interruptAfterTimeLimit: number;
  seed?: number;
} {
  const seed = process.env.FUZZ_SEED;
  return {
    numRuns: Number(process.env.FUZZ_RUNS ?? o.runs),
    interruptAfterTimeLimit: o.timeLimitMs,
    ...(seed === undefined ? {} : { seed: Number(seed) }),
  };
}
