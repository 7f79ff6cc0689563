// The renditions of a live ladder (spec/API.md section D, Livepeer's FfmpegProfile): their
// rules, the default ladder, and the rungs a source gets. The one place these are written:
// the wire schema (api/contract/stream.ts) takes its bounds from PROFILE_BOUNDS, and the
// runtime's ladder (ladder.ts) takes its rungs from rungsFor.

/** One rendition of a live ladder, as Livepeer's `profiles[]` has it. */
export interface Profile {
  /** The rendition's name in playlists (`{name}/index.m3u8`); `source` is the passthrough's. */
  name: string;
  width: number;
  height: number;
  /** Bits per second. */
  bitrate: number;
  /** Frames per second; 0 keeps the source's rate (Livepeer's meaning). */
  fps: number;
  fpsDen?: number;
  /** Keyframe interval in seconds as a string; a live ladder puts one at every segment start anyway. */
  gop?: string;
  profile?: H264Profile;
  encoder?: 'H.264';
  /** Livepeer's constant-quality hint, kept as given: live rungs encode at their bitrate. */
  quality?: number;
}

export const H264_PROFILES = ['H264Baseline', 'H264Main', 'H264High', 'H264ConstrainedHigh'] as const;
export type H264Profile = (typeof H264_PROFILES)[number];

/** The name of the source's own rendition (passed through when it is H.264); no profile may take it. */
export const SOURCE_RENDITION = 'source';

/**
 * The bounds of a profile's numbers. Width and height stop at 4K: a live ladder encodes every
 * rung in real time on the node. Bitrates are Livepeer's range of sensible live rates.
 */
export const PROFILE_BOUNDS = {
  maxProfiles: 8,
  nameMaxLength: 64,
  namePattern: '^[A-Za-z0-9_.-]+$',
  width: { min: 128, max: 3840 },
  height: { min: 128, max: 2160 },
  bitrate: { min: 50_000, max: 50_000_000 },
  fps: { min: 0, max: 120 },
  fpsDen: { min: 1, max: 1001 },
} as const;

/** Livepeer's default live ladder (its docs and studio's stream controller), used when a stream has no `profiles`. */
export const DEFAULT_LIVE_PROFILES: readonly Profile[] = Object.freeze([
  { name: '240p0', width: 426, height: 240, bitrate: 250_000, fps: 0 },
  { name: '360p0', width: 640, height: 360, bitrate: 800_000, fps: 0 },
  { name: '480p0', width: 854, height: 480, bitrate: 1_600_000, fps: 0 },
  { name: '720p0', width: 1280, height: 720, bitrate: 3_000_000, fps: 0 },
]);

/**
 * What the schema cannot say of a ladder: each message names the field path and the rule
 * (`profiles[1].width: must be even`). Empty when the ladder is fine.
 */
export function profileProblems(profiles: readonly Profile[], field = 'profiles'): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  profiles.forEach((p, i) => {
    const at = `${field}[${i}]`;
    if (p.name === SOURCE_RENDITION)
      problems.push(`${at}.name: "${SOURCE_RENDITION}" is the passthrough of the source; choose another name`);
    if (seen.has(p.name)) problems.push(`${at}.name: "${p.name}" is used by another profile; names must be unique`);
    seen.add(p.name);
    // H.264 in 4:2:0 needs even dimensions (x264 refuses odd ones).
    if (p.width % 2 !== 0) problems.push(`${at}.width: must be even`);
    if (p.height % 2 !== 0) problems.push(`${at}.height: must be even`);
    if (p.gop !== undefined && !gopIsValid(p.gop))
      problems.push(`${at}.gop: must be "intra" or a number of seconds from 0.1 to 10`);
  });
  return problems;
}

function gopIsValid(gop: string): boolean {
  if (gop === 'intra') return true;
  const secs = Number(gop);
  return /^\d+(\.\d+)?$/.test(gop) && secs >= 0.1 && secs <= 10;
}

/**
 * The rungs a source gets: the stream's profiles (the default ladder when it has none), never
 * above the source's height (a rung taller than the source would only upscale). `[]` stays
 * `[]`: the source alone. A source of unknown height keeps every rung.
 */
export function rungsFor(profiles: readonly Profile[] | null, source: { height?: number | undefined }): Profile[] {
  const ladder = profiles ?? DEFAULT_LIVE_PROFILES;
  const height = source.height;
  return ladder.filter((p) => height === undefined || p.height <= height);
}
