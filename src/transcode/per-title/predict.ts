// From the probes' bits to each rung's predicted bitrate, and which rungs are worth keeping
// (issue #31). Pure functions: the analysis' figures in, the rungs' choices out.
import type { PerTitleChoice, Rendition } from '../renditions.ts';
import type { ProbeSize } from './analyze.ts';

export interface RungPrediction {
  /** Average video bits a second at the target CRF. */
  bitrate: number;
  /** The largest keyframe at the rung's size, in bits. */
  keyframeBits: number;
}

// How bits grow with the picture's size, as an exponent of the pixel count, measured between
// the two probe sizes. Natural video measured 0.5 to 0.7 (the shared samples 13 and 16, 180p
// to 720p at CRF 23); grain and synthetic detail up to 1.9. Bounded so that a keyframe-bound
// still (whose probes cost about the same) or a noisy probe cannot predict nonsense.
const MIN_GROWTH = 0.3;
const MAX_GROWTH = 2;

function growth(large: number, small: number, pixelRatio: number): number {
  if (!(large > 0 && small > 0) || !(pixelRatio > 1)) return 1;
  const g = Math.log(large / small) / Math.log(pixelRatio);
  return Math.min(MAX_GROWTH, Math.max(MIN_GROWTH, g));
}

/**
 * One rung's bitrate at the target CRF: between the two probes (larger first) on a straight
 * line in log bits against log pixels; the largest rung is the larger probe itself.
 */
export function predictRung(
  probes: readonly [ProbeSize, ProbeSize],
  rung: { width: number; height: number },
  segmentSecs: number,
  /** Bits at the rung's CRF over bits at the probes' (1 when they are the same). */
  crfFactor = 1,
): RungPrediction {
  const [a, b] = probes;
  const pixB = b.width * b.height;
  const ratio = (a.width * a.height) / pixB;
  const up = (rung.width * rung.height) / pixB;
  const inter = crfFactor * b.interBitsPerSec * up ** growth(a.interBitsPerSec, b.interBitsPerSec, ratio);
  const keyframeBits = crfFactor * b.keyframeBits * up ** growth(a.keyframeBits, b.keyframeBits, ratio);
  // The encode starts a keyframe every segment (encoders.ts keyframeArgs): one per segment.
  return { bitrate: Math.round(inter + keyframeBits / segmentSecs), keyframeBits: Math.round(keyframeBits) };
}

// A smaller rung is shown larger than it is (a player scales 360p up to the screen, and VMAF
// scores it scaled up to the source), so its coding errors are magnified: it aims at a lower
// CRF, 4 steps per halving of its size below the largest rung's. Measured on a talking head
// with sensor grain (720p source): the 360p rung at CRF 21 scored VMAF 79.1 against the fixed
// 1 Mbps rung's 82.8; at 17, 81.6; at 14, 82.6, for 305 KB against the fixed rung's 978 KB.
// Small rungs are cheap: their lower CRF costs few of the ladder's bytes.
const CRF_PER_HALVING = 4;
const LOWEST_CRF = 12;

/** The CRF a default rung aims at: the target at the largest rung's size, lower below it. */
export function rungCrf(
  r: { width: number; height: number },
  largest: { width: number; height: number },
  target: number,
): number {
  const halvings = Math.log2(Math.min(largest.width, largest.height) / Math.min(r.width, r.height));
  return Math.max(LOWEST_CRF, Math.round(target - CRF_PER_HALVING * Math.max(0, halvings)));
}

// A rung predicted at nearly its cap is a hard title's: its CRF encode would meet the cap in
// most scenes anyway, and ABR at the cap (what the fixed ladder does) spends the same bits
// better than a CRF held down by the VBV. Below this share of the cap, capped CRF spends what
// the title needs and never more than the cap: the animation's 360p rung, predicted at 0.83
// of its cap, spent 0.64 of it at CRF, where ABR at the cap spends all of it (1.3 VMAF more
// for 1.5x the bits, bench/README.md).
const NEAR_CAP = 0.9;

/**
 * A rung's choice: capped CRF at the target, predicted to spend `bitrate`; or ABR at its cap
 * for a hard title. `cap` is the most the rung may spend: its bitrate, or the keyframe floor
 * where a low source bitrate put it below that (encoders.ts rateControl).
 */
export function choiceFor(
  p: RungPrediction,
  o: { cap: number; crf: number; ssim: number | undefined },
): PerTitleChoice {
  if (p.bitrate >= o.cap * NEAR_CAP) return { predictedBitrate: o.cap, cap: o.cap, hitsCap: true };
  return {
    crf: o.crf,
    predictedBitrate: p.bitrate,
    cap: o.cap,
    hitsCap: false,
    // The probe's SSIM is what the target CRF gives this title at the probe's size.
    ...(o.ssim !== undefined ? { predictedSsim: Math.round(o.ssim * 10000) / 10000 } : {}),
  };
}

// A lower rung earns its place when it saves a player real bandwidth: the rung above it must
// cost more than 1.25x as much, and more than 150 kb/s (with the 128 kb/s audio, under
// 300 kb/s in all: any network that plays video plays it). A still slide's 360p rung at
// 40 kb/s beside a 720p rung at 70 kb/s only makes a player start blurry.
const USEFUL_STEP = 1.25;
const ANY_NETWORK_BPS = 150_000;

// A rung starved by its cap (a low source bitrate caps every rung at it) needs more than this
// many times its cap for the target quality; one that fits needs at most FITS times it. Of two
// rungs that cost the same, a smaller one that fits shows a better picture than a larger one
// starved at the same bits. Measured on sample 14 (a 311 kb/s source: its 720p rung needs 1.6x
// its cap, its 360p rung 1.04x): at about 330 kb/s each, the 360p rung scored VMAF 63.1 against
// the 720p rung's 58.5. A screen recording's rungs (sample 07: 1080p 3.0x, 720p 2.1x, 360p 1.3x)
// are all starved, and there the largest stays: text wants pixels.
const STARVED = 1.25;
const FITS = 1.1;

/**
 * The default ladder's rungs that add something over their neighbour: a lower rung whose
 * upper neighbour costs about as much is dropped, unless the upper one is starved by its cap
 * and the lower one fits its own: then the upper one goes instead. The top rung otherwise
 * always stays, and rungs a caller asked for by a profile are never dropped. `needs`: each
 * rung's predicted bitrate at its CRF, before its cap (by name).
 */
export function usefulRungs(rungs: readonly Rendition[], needs: ReadonlyMap<string, number> = new Map()): Rendition[] {
  const kept: Rendition[] = [];
  const bySize = [...rungs].sort((x, y) => y.width * y.height - x.width * x.height);
  const tuned = (r: Rendition | undefined): r is Rendition => r?.perTitle === 'ladder';
  for (const r of bySize) {
    const upper = kept.at(-1);
    if (tuned(upper) && tuned(r) && adds(r, upper) === false && starved(upper, needs) && fits(r, needs)) kept.pop();
    const above = kept.at(-1);
    if (tuned(above) && tuned(r) && adds(r, above) === false) continue;
    kept.push(r);
  }
  // Back in the planned order.
  return rungs.filter((r) => kept.includes(r));
}

/** Needs, at its CRF, more than its cap: `over` times it at least (fits: at most). */
function needOverCap(r: Rendition, needs: ReadonlyMap<string, number>): number | undefined {
  const need = needs.get(r.name);
  const cap = r.choice?.cap;
  return need === undefined || !cap ? undefined : need / cap;
}

function starved(r: Rendition, needs: ReadonlyMap<string, number>): boolean {
  return (needOverCap(r, needs) ?? 0) > STARVED;
}

function fits(r: Rendition, needs: ReadonlyMap<string, number>): boolean {
  return (needOverCap(r, needs) ?? Number.POSITIVE_INFINITY) <= FITS;
}

function adds(lower: Rendition, upper: Rendition): boolean | undefined {
  const lo = lower.choice?.predictedBitrate;
  const hi = upper.choice?.predictedBitrate;
  if (lo === undefined || hi === undefined) return undefined;
  return hi > lo * USEFUL_STEP && hi > ANY_NETWORK_BPS;
}
