// The summary statistics every bench prints. NaN when there is no sample: a bench that measured
// nothing prints NaN rather than a figure that looks like one.

/** The middle sample, or the mean of the two middle ones. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
}

/** The sample at fraction `q` (0 to 1) of the sorted samples, rounding down (no interpolation). */
export function quantile(xs: number[], q: number): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))] ?? NaN;
}
