import type { Logger } from 'pino';
import { CancelledError } from '../../lib/errors.ts';
import { rateCap, TARGET_CRF } from '../encoders.ts';
import type { MediaInfo } from '../probe.ts';
import { type Rendition, rateText } from '../renditions.ts';
import { MIN_ANALYSED_SECS, probeEncode, sampleWindows, type ProbeSize } from './analyze.ts';
import { choiceFor, predictRung, rungCrf, usefulRungs } from './predict.ts';

// Issue #31: the per-title ladder. A fast analysis (analyze.ts) measures how many bits this
// title needs at the target CRF; each tunable rung is then encoded as capped CRF (the target
// CRF, lower for the smaller rungs, with the rung's planned bitrate as its peak and so its
// most): an easy title spends far less than the fixed ladder, a hard one up to the cap and
// never beyond (ABR at the cap where it would spend about all of it anyway). A default-ladder rung
// that saves no bandwidth over the rung above it is dropped (predict.ts).

export interface LadderChoice {
  /** A path or URL ffmpeg can read. */
  input: string;
  media: MediaInfo;
  duration: number;
  renditions: Rendition[];
  ffmpegPath: string;
  signal: AbortSignal;
  progress?(fraction: number): void;
  /** The encode's x264 preset (the probes use it too); default veryfast. */
  preset?: string;
  /** The job's segment duration: a keyframe starts each segment. Default 6. */
  segmentSecs?: number;
  log?: Logger | undefined;
  /**
   * The part of the input judged, in seconds: a split job's chunk judges its own
   * (chunked/chunk-ladder.ts). Default: the whole `duration`.
   */
  span?: { start: number; length: number } | undefined;
  /**
   * Every rung kept, only its rate chosen: the chunks of a split job each choose for their own
   * part of the video, and every chunk must write the same ladder.
   */
  keepRungs?: boolean | undefined;
}

/**
 * The renditions with their rate control chosen for this title (or the span of it judged):
 * each tunable rung (the default ladder's, a profile's with `perTitle`) gets a capped-CRF
 * `choice`, and useless default rungs are dropped unless `keepRungs`. Renditions with nothing
 * to tune come back as they are. An analysis that fails leaves the planned ladder (logged):
 * the choice saves bits, the job does not depend on it.
 */
export async function chooseLadder(o: LadderChoice): Promise<Rendition[]> {
  const tunable = tunableRungs(o.renditions);
  const first = tunable[0];
  const span = o.span ?? { start: 0, length: o.duration };
  if (!first || !o.media.video || !(span.length >= MIN_ANALYSED_SECS)) return o.renditions;
  o.progress?.(0);
  let probes: [ProbeSize, ProbeSize];
  try {
    probes = await probeEncode({
      input: o.input,
      ffmpegPath: o.ffmpegPath,
      windows: sampleWindows(span.length, span.start),
      sizes: probeSizes(tunable),
      fps: first.fps,
      crf: TARGET_CRF,
      preset: o.preset ?? 'veryfast',
      signal: o.signal,
    });
  } catch (err) {
    if (o.signal.aborted || err instanceof CancelledError) throw err;
    o.log?.warn({ err }, 'per-title analysis failed: the planned ladder is kept');
    return o.renditions;
  }
  const segmentSecs = o.segmentSecs ?? 6;
  const [largest] = probeSizes(tunable);
  // Each rung's predicted bitrate before its cap (usefulRungs: a rung starved by its cap).
  const needs = new Map<string, number>();
  const chosen = o.renditions.map((r) => {
    if (r.perTitle === undefined || r.codec !== 'h264') return r;
    // A profile's own `quality` is its target; x264 spends about twice the bits per 6 CRF steps.
    const crf = r.crf ?? rungCrf(r, largest, TARGET_CRF);
    const p = predictRung(probes, r, segmentSecs, 2 ** ((TARGET_CRF - crf) / 6));
    needs.set(r.name, p.bitrate);
    const ssim = crf === TARGET_CRF ? probes[0].ssim : undefined;
    const measured = { ...r, keyframeBits: p.keyframeBits };
    const cap = rateCap(measured, segmentSecs);
    return { ...measured, choice: choiceFor(p, { cap, crf, ssim }) };
  });
  o.progress?.(1);
  const kept = o.keepRungs ? chosen : usefulRungs(chosen, needs);
  o.log?.info(
    {
      ...(o.span ? { span: `${o.span.start.toFixed(1)}+${o.span.length.toFixed(1)} s` } : {}),
      probes: probes.map(
        (p) => `${p.width}x${p.height} ${Math.round(p.interBitsPerSec)} b/s + key ${p.keyframeBits} b`,
      ),
      rungs: chosen.map((r) => `${r.name} ${rateText(r)}`),
      dropped: chosen.filter((r) => !kept.includes(r)).map((r) => r.name),
    },
    'per-title ladder chosen',
  );
  return kept;
}

/** The rungs whose rate the per-title ladder chooses: the default ladder's and the profiles' that ask, in H.264. */
export function tunableRungs(renditions: readonly Rendition[]): Rendition[] {
  return renditions.filter((r) => r.perTitle !== undefined && r.codec === 'h264');
}

/**
 * The probes' sizes: the largest tunable rung's own (see analyze.ts: only it shows what its
 * size costs), and the smallest's at half its sides, but not below 96 pixels on the short side.
 */
function probeSizes(
  rungs: readonly Rendition[],
): [{ width: number; height: number }, { width: number; height: number }] {
  const bySize = [...rungs].sort((x, y) => x.width * x.height - y.width * y.height);
  const small = bySize[0] as Rendition;
  const large = bySize.at(-1) as Rendition;
  const k = Math.min(1, Math.max(0.5, 96 / Math.min(small.width, small.height)));
  return [
    { width: large.width, height: large.height },
    { width: even(small.width * k), height: even(small.height * k) },
  ];
}

function even(x: number): number {
  return Math.max(16, Math.round(x / 2) * 2);
}
