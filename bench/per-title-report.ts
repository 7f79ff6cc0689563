// What bench/per-title.ts measured and how it prints it: each rung's bytes and VMAF in the
// fixed and the auto ladder, a table per title, and the totals against the targets. Apart from
// the measuring so that `--from` can print earlier runs' BENCH_JSON files the same way.

export interface RungResult {
  name: string;
  width: number;
  height: number;
  /** Video bytes in the rendition's MP4. */
  bytes: number;
  /** Video kb/s over the title's duration. */
  kbps: number;
  vmaf: number;
  /** What the ladder said it chose (the task output's extra fields), when it says. */
  chosen: string;
}

export interface LadderResult {
  rungs: RungResult[];
  /** CPU seconds of the run's children (ffmpeg, ffprobe). */
  cpu: number;
  wall: number;
}

export interface TitleResult {
  title: string;
  source: string;
  duration: number;
  fixed: LadderResult;
  auto: LadderResult | undefined;
  /** CPU seconds of the analysis alone. */
  analysisCpu: number | undefined;
}

/** The auto rung a player with the fixed rung's bandwidth would take (the same one when kept). */
function counterpart(f: RungResult, auto: RungResult[]): RungResult | undefined {
  const same = auto.find((a) => a.name === f.name);
  if (same) return same;
  const within = auto.filter((a) => a.kbps <= f.kbps).sort((x, y) => y.kbps - x.kbps);
  return within[0] ?? [...auto].sort((x, y) => x.kbps - y.kbps)[0];
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
const mean = (xs: number[]): number => sum(xs) / xs.length;
const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '-');

export function printTitle(r: TitleResult): void {
  console.log(`\n${r.title} (${r.source})`);
  console.log('| rung | fixed kb/s | fixed VMAF | auto kb/s | auto VMAF | delta VMAF | auto chose |');
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const f of r.fixed.rungs) {
    const a = r.auto && counterpart(f, r.auto.rungs);
    const as = a && a.name !== f.name ? `${a.name}: ` : '';
    console.log(
      `| ${f.name} ${f.width}x${f.height} | ${f1(f.kbps)} | ${f1(f.vmaf)} | ${as}${a ? f1(a.kbps) : '-'} | ${a ? f1(a.vmaf) : '-'} | ${a ? f1(a.vmaf - f.vmaf) : '-'} | ${a?.chosen ?? ''} |`,
    );
  }
  const fb = sum(r.fixed.rungs.map((x) => x.bytes));
  const ab = r.auto ? sum(r.auto.rungs.map((x) => x.bytes)) : NaN;
  const enc = r.auto ? r.auto.cpu - (r.analysisCpu ?? 0) : NaN;
  console.log(
    `bytes auto/fixed ${(ab / fb).toFixed(3)} (${fb} -> ${ab}); CPU s fixed ${r.fixed.cpu.toFixed(1)}, auto ${r.auto?.cpu.toFixed(1)}, analysis alone ${r.analysisCpu?.toFixed(2)} (${((100 * (r.analysisCpu ?? NaN)) / enc).toFixed(1)}% of the auto encode)`,
  );
}

/** Each title's mean over its fixed rungs, auto counterparts against them. */
function titleFigures(r: TitleResult) {
  const pairs = r.fixed.rungs.map((f) => ({ f, a: r.auto && counterpart(f, r.auto.rungs) }));
  const fixedBytes = sum(r.fixed.rungs.map((x) => x.bytes));
  const autoBytes = r.auto ? sum(r.auto.rungs.map((x) => x.bytes)) : NaN;
  return {
    fixedBytes,
    autoBytes,
    fixedVmaf: mean(pairs.map((p) => p.f.vmaf)),
    autoVmaf: mean(pairs.map((p) => p.a?.vmaf ?? NaN)),
    deltas: pairs.map((p) => (p.a?.vmaf ?? NaN) - p.f.vmaf),
    encodeCpu: r.auto ? r.auto.cpu - (r.analysisCpu ?? 0) : NaN,
  };
}

export function printSummary(results: TitleResult[]): void {
  const figs = results.map((r) => ({ r, ...titleFigures(r) }));
  console.log(
    '\n| title | source | fixed ladder kb/s (all rungs) | auto ladder kb/s | auto/fixed bytes | fixed VMAF (mean of rungs) | auto VMAF | delta | analysis CPU |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const x of figs) {
    const kbps = (b: number) => f1((b * 8) / x.r.duration / 1000);
    const share = (100 * (x.r.analysisCpu ?? NaN)) / x.encodeCpu;
    console.log(
      `| ${x.r.title} | ${x.r.source} | ${kbps(x.fixedBytes)} | ${kbps(x.autoBytes)} | ${(x.autoBytes / x.fixedBytes).toFixed(2)} | ${f1(x.fixedVmaf)} | ${f1(x.autoVmaf)} | ${f1(x.autoVmaf - x.fixedVmaf)} | ${f1(share)}% |`,
    );
  }
  const fixedBytes = sum(figs.map((x) => x.fixedBytes));
  const autoBytes = sum(figs.map((x) => x.autoBytes));
  const deltas = figs.flatMap((x) => x.deltas);
  const worst = [...figs].sort((x, y) => x.autoVmaf - x.fixedVmaf - (y.autoVmaf - y.fixedVmaf))[0];
  const share = sum(figs.map((x) => x.r.analysisCpu ?? NaN)) / sum(figs.map((x) => x.encodeCpu));
  const saved = 1 - autoBytes / fixedBytes;
  const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');
  console.log(
    `\ntotal bytes: fixed ${fixedBytes}, auto ${autoBytes}: ${(100 * saved).toFixed(1)}% fewer (target >= 20%: ${verdict(saved >= 0.2)}); mean of the titles' auto/fixed ${mean(figs.map((x) => x.autoBytes / x.fixedBytes)).toFixed(3)}`,
  );
  const meanDelta = mean(deltas);
  console.log(
    `mean VMAF over ${deltas.length} rungs: fixed ${f1(mean(figs.flatMap((x) => x.r.fixed.rungs.map((f) => f.vmaf))))}, auto ${f1(mean(figs.flatMap((x) => x.r.fixed.rungs.map((f) => f.vmaf))) + meanDelta)}, delta ${meanDelta.toFixed(2)} (target >= -1: ${verdict(meanDelta >= -1)})`,
  );
  if (worst)
    console.log(
      `worst title: ${worst.r.title}, ${(worst.autoVmaf - worst.fixedVmaf).toFixed(2)} VMAF (target >= -2: ${verdict(worst.autoVmaf - worst.fixedVmaf >= -2)})`,
    );
  console.log(
    `analysis CPU: ${(100 * share).toFixed(1)}% of the auto encodes' (target <= 15%: ${verdict(share <= 0.15)})`,
  );
  const same = figs.every((x) => Math.abs(x.autoBytes / x.fixedBytes - 1) < 0.002);
  if (same)
    console.log(
      'NOTE: both ladders gave the same bytes: the per-title choice is not on (is MEDIAPLANE_PER_TITLE false?)',
    );
  for (const x of figs.filter((x) => !same && x.autoBytes >= 0.9 * x.fixedBytes))
    console.log(
      `hard title: ${x.r.title} spends ${(x.autoBytes / x.fixedBytes).toFixed(2)}x the fixed ladder's bytes (up to each rung's cap) for ${f1(x.autoVmaf - x.fixedVmaf)} VMAF: ${x.autoVmaf >= x.fixedVmaf ? 'right: quality where the picture needs it' : 'the cap limits it'}`,
    );
}
