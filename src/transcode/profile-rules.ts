import { OUTPUT_FORMATS, type OutputFormat } from './outputs/index.ts';
import type { ProfileSpec } from './renditions.ts';

// What a job's profiles and outputs must meet, from what each output format says of itself
// (its encoders, its reserved folders, whether it signs). Asked by the API before queueing (a
// 422 naming the field, api/validate-transcode.ts) and again by the ladder and the handler for
// tasks queued elsewhere (a failed task): written once, here (issue #26).

/** One rule a profile breaks, worded for each of the two places that refuse it. */
export interface ProfileProblem {
  /** The profile's field at fault. */
  field: 'name' | 'encoder' | 'gop';
  /** As a 422 says it, after `profiles[i].<field>: `. */
  rule: string;
  /** As a failed task says it, after `profile <name>: `. */
  failure: string;
}

/** Which formats the job writes. */
export type WrittenFormats = (format: OutputFormat) => boolean;

/** The formats a job's `outputs` asks for. */
export function writtenBy(outputs: Readonly<Partial<Record<string, unknown>>>): WrittenFormats {
  return (f) => !!outputs[f.key];
}

const FORMATS: readonly OutputFormat[] = OUTPUT_FORMATS;
const unique = <T>(xs: readonly T[]): T[] => [...new Set(xs)];

/** The folders beside the renditions (audio groups, subtitles, the storyboard): a rendition of that name would write into them (issue #19). */
export const RESERVED_RENDITION_NAMES: readonly string[] = unique(FORMATS.flatMap((f) => f.reservedNames ?? []));
/** Every encoder some format takes. */
const ENCODERS = unique(FORMATS.flatMap((f) => f.encoders ?? []));

/** Whether a rendition name is, or lies under, a reserved folder (any case: some disks fold it). */
export function isReservedName(name: string): boolean {
  const head = name.split('/')[0]?.toLowerCase() ?? '';
  return RESERVED_RENDITION_NAMES.includes(head);
}

/**
 * The rules of issue #19, in the order they are reported: reserved rendition names; an
 * encoder no format takes (VP8); an encoder a written format does not take (AV1 and VP9 have
 * no TS mapping players take); SVT-AV1 1.4 has no all-keyframe mode.
 */
export function profileProblems(p: ProfileSpec, writes: WrittenFormats): ProfileProblem[] {
  const problems: ProfileProblem[] = [];
  if (isReservedName(p.name)) {
    const names = RESERVED_RENDITION_NAMES.join(', ');
    problems.push({
      field: 'name',
      rule: `${names} are reserved for the folders beside the renditions`,
      failure: `the name is reserved for the ${names} folders; choose another`,
    });
  }
  const encoder = p.encoder;
  if (encoder && !ENCODERS.includes(encoder)) {
    const use = `is not supported; use ${list(ENCODERS, 'or')}`;
    problems.push({ field: 'encoder', rule: `${encoder} ${use}`, failure: `the ${encoder} encoder ${use}` });
  } else if (encoder) {
    // The HLS trees first, then the files: "fMP4 (HLS and DASH) and MP4".
    const takers = FORMATS.filter((f) => f.encoders?.includes(encoder))
      .sort((a, b) => Number(!!b.tree) - Number(!!a.tree))
      .map((f) => f.label);
    for (const f of FORMATS.filter((f) => writes(f) && f.encoders && !f.encoders.includes(encoder))) {
      const failure = `${encoder} is only available in ${list(takers, 'and')} outputs, not in ${f.label}`;
      problems.push({ field: 'encoder', rule: `${failure} (outputs.${f.key})`, failure });
    }
  }
  // SVT-AV1 1.4 has no all-keyframe mode: an intra period of 0 means "none after the first".
  if (encoder === 'AV1' && p.gop === 'intra')
    problems.push({
      field: 'gop',
      rule: '"intra" (every frame a keyframe) is not available with AV1; give it in seconds',
      failure: 'gop "intra" (every frame a keyframe) is not available with AV1',
    });
  return problems;
}

/**
 * Issue #19: only the files of the formats that sign (MP4) are signed; a job with `c2pa` and
 * none of them would complete unsigned. Says why, or undefined when the outputs allow it.
 */
export function signingProblem(outputs: Readonly<Partial<Record<string, unknown>>>): string | undefined {
  const signers = FORMATS.filter((f) => f.signs);
  if (signers.some((f) => outputs[f.key])) return undefined;
  const labels = list(
    signers.map((f) => f.label),
    'and',
  );
  return `signing applies to ${labels} outputs; add ${list(
    signers.map((f) => `outputs.${f.key}`),
    'or',
  )}`;
}

/** "a", "a and b", "a, b and c". */
function list(xs: readonly string[], last: 'and' | 'or'): string {
  return xs.length < 2 ? (xs[0] ?? '') : `${xs.slice(0, -1).join(', ')} ${last} ${xs.at(-1)}`;
}
