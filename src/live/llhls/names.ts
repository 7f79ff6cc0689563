// The names of a rendition's files, in one place: the playlists write them, file() reads
// them back. Files are cached as immutable under their names, so a name is never reused.

export const initName = (run: number): string => `init-${run}.mp4`;
export const segmentName = (msn: number): string => `${msn}.m4s`;
export const partName = (msn: number, part: number): string => `${msn}.${part}.m4s`;

export type FileName =
  | { kind: 'init'; run: number }
  | { kind: 'segment'; msn: number }
  | { kind: 'part'; msn: number; part: number };

// One name per file: no leading zeros (00.m4s is not 0.m4s under another name).
const NUMBER = '(0|[1-9]\\d{0,11})';
const INIT = /^init-(0|[1-9]\d{0,8})\.mp4$/;
const SEGMENT = new RegExp(`^${NUMBER}\\.m4s$`);
const PART = new RegExp(`^${NUMBER}\\.(0|[1-9]\\d{0,5})\\.m4s$`);

/** What a file name names, or undefined for a name no rendition writes. */
export function parseFileName(name: string): FileName | undefined {
  const init = INIT.exec(name);
  if (init !== null) return { kind: 'init', run: Number(init[1]) };
  const segment = SEGMENT.exec(name);
  if (segment !== null) return { kind: 'segment', msn: Number(segment[1]) };
  const part = PART.exec(name);
  if (part !== null) return { kind: 'part', msn: Number(part[1]), part: Number(part[2]) };
  return undefined;
}

/**
 * Where a rendition's names start: segment `firstMsn`, init `init-{firstRun}.mp4`. A playbackId
 * goes live again and again, and a new publish must not reuse an old one's names. By default
 * both come from the wall clock when the rendition is made: msn in tenths of a second (a
 * segment lasts longer, so one publish's numbers stay below the next one's start), runs in
 * seconds (9 digits; a restart takes longer than a second).
 */
export interface RenditionNumbering {
  firstMsn: number;
  firstRun: number;
}

export function numberingAt(wallMs: number): RenditionNumbering {
  return { firstMsn: Math.floor(wallMs / 100), firstRun: Math.floor(wallMs / 1000) % 1e9 };
}
