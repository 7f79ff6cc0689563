import type { PlaylistSegment } from './playlist.ts';

// Blocking playlist reload and hinted parts (RFC 8216bis, 6.2.5.2 and 6.2.6), as questions
// about the segments a rendition lists now: is a request refused, answered, or held.

/** Advance Part Limit (RFC 8216bis, 6.2.5.2): 3 / PART-TARGET below one second, else 3. */
const ADVANCE_PART_SECS = 3;

export interface ReloadDirectives {
  /** `_HLS_msn` */
  msn?: number | undefined;
  /** `_HLS_part` */
  part?: number | undefined;
}

/** Why a blocking request is refused at once with 400 (RFC 8216bis, 6.2.5.2), or undefined. */
export function refusal(
  req: ReloadDirectives,
  segments: readonly PlaylistSegment[],
  o: { partTargetSecs: number; nextMsn: number },
): string | undefined {
  const { msn, part } = req;
  if (part !== undefined && msn === undefined) return '_HLS_part without _HLS_msn';
  if (msn === undefined) return undefined;
  if (!Number.isSafeInteger(msn) || msn < 0) return '_HLS_msn must be a whole number';
  if (part !== undefined && (!Number.isSafeInteger(part) || part < 0)) return '_HLS_part must be a whole number';
  // Before any segment is whole, the one before the first (or the next) counts as the last.
  const lastComplete = segments.findLast((s) => s.complete)?.msn ?? (segments[0]?.msn ?? o.nextMsn) - 1;
  if (msn > lastComplete + 2) return `_HLS_msn ${msn} is more than two segments past the last (${lastComplete})`;
  const limit = o.partTargetSecs < 1 ? ADVANCE_PART_SECS / o.partTargetSecs : ADVANCE_PART_SECS;
  if (part !== undefined && partsAhead(segments, o.nextMsn, msn, part) > limit) {
    return `_HLS_part ${part} of segment ${msn} is past the Advance Part Limit (${Math.floor(limit)} parts)`;
  }
  return undefined;
}

/** How many parts past the newest part `msn.part` is (0 or less: already there). */
function partsAhead(segments: readonly PlaylistSegment[], nextMsn: number, msn: number, part: number): number {
  const last = segments.at(-1);
  if (last === undefined) return msn < nextMsn ? 0 : part + 1;
  // A whole last segment: the next part is part 0 of the next segment.
  const lastMsn = last.complete ? last.msn + 1 : last.msn;
  const lastPart = last.complete ? -1 : last.parts.length - 1;
  if (msn < lastMsn) return 0;
  if (msn === lastMsn) return part - lastPart;
  return part + 1;
}

/**
 * The playlist holds part `part` of segment `msn` or a later part; without `part`, segment
 * `msn` whole. A part index past a segment's last is part 0 of the next one (6.2.5.2): a
 * later segment having any part answers it.
 */
export function holds(segments: readonly PlaylistSegment[], msn: number, part: number | undefined): boolean {
  const last = segments.at(-1);
  if (last === undefined || last.msn < msn) return false;
  if (last.msn > msn) return true;
  return part === undefined ? last.complete : last.parts.length > part;
}

/**
 * Whether `msn.part` is the part that comes next: the next one of the open segment, or the
 * first of the next segment (the hint names one of them; the other is as likely to come).
 */
export function isNextPart(segments: readonly PlaylistSegment[], nextMsn: number, msn: number, part: number): boolean {
  const last = segments.at(-1);
  if (last === undefined || last.complete) return msn === nextMsn && part === 0;
  return (msn === last.msn && part === last.parts.length) || (msn === last.msn + 1 && part === 0);
}
