// DASH over CMAF (issue #19): a static MPD over the very fMP4 files the HLS fMP4 output
// lists, so one set of media has two manifests. Each Representation's SegmentTemplate
// carries a SegmentTimeline read from the segments themselves (tfdt, trun durations), so
// shaka-player and dash.js place every segment where its media really is, whatever the
// muxer's cut points were. ISO/IEC 23009-1 (MPD schema), DASH-IF IOP for the conventions.

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { InternalError } from '../lib/errors.ts';
import { readInitSegment, readMediaSegment } from './mp4-boxes.ts';
import { parseMediaPlaylist } from './playlist.ts';
import type { Rational } from './probe.ts';

/** One `<S>` of a SegmentTimeline: `r` more segments of the same duration follow the first. */
export interface TimelineEntry {
  /** Start, in the track timescale (written only where it does not follow the previous end). */
  t: number;
  d: number;
  r: number;
}

export interface SegmentTimeline {
  /** Ticks per second of the track (mdhd), the SegmentTemplate@timescale. */
  timescale: number;
  entries: TimelineEntry[];
  /** Number of segments (0.m4s ... n-1.m4s). */
  segments: number;
  /** Where the last segment ends, seconds. */
  end: number;
  /** The longest segment, seconds. */
  longest: number;
}

/** The file names the MPD's SegmentTemplate expects; ffmpeg's `%d.m4s` from 0 (command.ts). */
export const INIT_NAME = 'init.mp4';
const segmentName = (n: number): string => `${n}.m4s`;

/**
 * The SegmentTimeline of one fMP4 media playlist folder: its `index.m3u8`, `init.mp4` and
 * the segments the playlist lists, read from their `moof` boxes.
 */
export async function timelineOf(dir: string): Promise<SegmentTimeline> {
  const playlist = parseMediaPlaylist(await readFile(path.join(dir, 'index.m3u8'), 'utf8'));
  if (playlist.map !== INIT_NAME)
    throw new InternalError(`dash: ${dir} has init segment ${playlist.map}, not init.mp4`);
  playlist.segments.forEach((s, n) => {
    if (s.uri !== segmentName(n)) throw new InternalError(`dash: ${dir} lists ${s.uri} as segment ${n}`);
  });
  if (playlist.segments.length === 0) throw new InternalError(`dash: ${dir} lists no segments`);
  const init = await readInitSegment(path.join(dir, INIT_NAME));
  const track = init.tracks[0];
  if (!track || init.tracks.length > 1) throw new InternalError(`dash: ${dir}/init.mp4 must hold one track`);
  const spans: Span[] = [];
  for (const s of playlist.segments) {
    const timing = (await readMediaSegment(path.join(dir, s.uri), init)).find((t) => t.trackId === track.trackId);
    if (!timing) throw new InternalError(`dash: ${dir}/${s.uri} has no samples of track ${track.trackId}`);
    spans.push({ start: timing.earliestPresentationTime - track.editShift, duration: timing.duration });
  }
  return buildTimeline(spans, track.timescale);
}

/** A segment's earliest presentation time (edit list applied) and its summed sample durations. */
export interface Span {
  start: number;
  duration: number;
}

/**
 * Segments placed at their earliest presentation time (where Chromium's MSE buffers them),
 * each lasting until the next starts (the last: its sample durations), so the timeline has
 * no gaps.
 */
export function buildTimeline(spans: readonly Span[], timescale: number): SegmentTimeline {
  const starts: number[] = [];
  let previousEnd = 0;
  for (const s of spans) {
    const previous = starts.at(-1);
    // @t is unsigned: a first start below 0 is clamped. Starts never go backwards: one that
    // would is placed after the previous segment's samples.
    const start = previous === undefined ? Math.max(0, s.start) : s.start > previous ? s.start : previousEnd;
    starts.push(start);
    previousEnd = start + s.duration;
  }
  const durations = spans.map((s, k) => (starts[k + 1] ?? (starts[k] ?? 0) + s.duration) - (starts[k] ?? 0));
  const entries: TimelineEntry[] = [];
  for (const [k, d] of durations.entries()) {
    const t = starts[k] ?? 0;
    const last = entries.at(-1);
    if (last && last.d === d && last.t + last.d * (last.r + 1) === t) last.r++;
    else entries.push({ t, d, r: 0 });
  }
  const endTicks = (starts.at(-1) ?? 0) + (durations.at(-1) ?? 0);
  return {
    timescale,
    entries,
    segments: spans.length,
    end: endTicks / timescale,
    longest: Math.max(0, ...durations) / timescale,
  };
}

export interface DashVideo {
  /** The rendition's name: the Representation@id. */
  name: string;
  /** Its folder beside the MPD, e.g. `360p0`. */
  dir: string;
  /** Peak bits per second, as in the HLS master's BANDWIDTH. */
  bandwidth: number;
  width: number;
  height: number;
  fps: Rational;
  /** RFC 6381 codecs string, e.g. `avc1.64001f`, `av01.0.08M.08`. */
  codecs: string;
  timeline: SegmentTimeline;
}

export interface DashAudio {
  /** Its folder beside the MPD, e.g. `audio/0`. */
  dir: string;
  /** Language tag (ISO 639 or BCP 47) as the input tagged it. */
  lang?: string | undefined;
  /** A name a player shows (the track's title). */
  label?: string | undefined;
  default: boolean;
  channels: number;
  sampleRate: number;
  bandwidth: number;
  codecs: string;
  timeline: SegmentTimeline;
}

export interface DashSubtitle {
  /** The WebVTT file beside the MPD, e.g. `subtitles/0/0.vtt`. */
  uri: string;
  lang?: string | undefined;
  label?: string | undefined;
  default: boolean;
}

export interface DashInput {
  /** No entries for audio-only media. */
  video: readonly DashVideo[];
  audio: readonly DashAudio[];
  subtitles: readonly DashSubtitle[];
}

/** The text of a static MPD (isoff-live profile: SegmentTemplate with $Number$) over the fMP4 output. */
export function dashManifest(input: DashInput): string {
  const timelines = [...input.video, ...input.audio].map((r) => r.timeline);
  if (timelines.length === 0) throw new InternalError('dash: a manifest needs a video or an audio track');
  // The presentation lasts until its last sample; rounded up to the millisecond, so no
  // segment falls outside it.
  const duration = Math.ceil(Math.max(...timelines.map((t) => t.end)) * 1000) / 1000;
  const minBuffer = Math.ceil(Math.max(...timelines.map((t) => t.longest)) * 1000) / 1000;
  const sets: string[][] = [];
  for (const group of byCodecFamily(input.video)) sets.push(videoSet(group, sets.length));
  for (const a of input.audio) sets.push(audioSet(a, sets.length));
  for (const s of input.subtitles) sets.push(textSet(s, sets.length));
  const mpd = element(
    'MPD',
    {
      xmlns: 'urn:mpeg:dash:schema:mpd:2011',
      profiles: 'urn:mpeg:dash:profile:isoff-live:2011',
      type: 'static',
      mediaPresentationDuration: xsDuration(duration),
      minBufferTime: xsDuration(minBuffer),
    },
    element('Period', { id: '0', start: 'PT0S' }, ...sets),
  );
  return `<?xml version="1.0" encoding="UTF-8"?>\n${mpd.join('\n')}\n`;
}

/**
 * Video Representations grouped by codec family (avc1, hvc1, av01, vp09), in order of first
 * appearance: a player switches seamlessly only within an AdaptationSet, and DASH-IF IOP
 * keeps one codec per set, so a mixed ladder (H.264 low rungs, AV1 high) is two sets and
 * the player picks the one it decodes.
 */
function byCodecFamily(video: readonly DashVideo[]): DashVideo[][] {
  const groups = new Map<string, DashVideo[]>();
  for (const v of video) {
    const family = v.codecs.split('.')[0] ?? v.codecs;
    groups.set(family, [...(groups.get(family) ?? []), v]);
  }
  return [...groups.values()];
}

function videoSet(group: readonly DashVideo[], id: number): string[] {
  const sorted = [...group].sort((a, b) => a.bandwidth - b.bandwidth);
  const fastest = sorted.reduce((a, b) => (b.fps.num / b.fps.den > a.fps.num / a.fps.den ? b : a));
  const ids = uniqueIds(sorted.map((v) => v.name));
  return element(
    'AdaptationSet',
    {
      id,
      contentType: 'video',
      mimeType: 'video/mp4',
      segmentAlignment: aligned(sorted.map((v) => v.timeline)) ? 'true' : undefined,
      startWithSAP: 1,
      maxWidth: Math.max(...sorted.map((v) => v.width)),
      maxHeight: Math.max(...sorted.map((v) => v.height)),
      maxFrameRate: frameRate(fastest.fps),
    },
    ...sorted.map((v, i) =>
      element(
        'Representation',
        {
          id: ids[i],
          bandwidth: Math.round(v.bandwidth),
          width: v.width,
          height: v.height,
          frameRate: frameRate(v.fps),
          sar: '1:1',
          codecs: v.codecs,
        },
        segmentTemplate(v.dir, v.timeline),
      ),
    ),
  );
}

/**
 * Whether the timelines start their segments at the same times (23009-1, 5.3.3.2:
 * segmentAlignment promises that segment k of one Representation never overlaps segment
 * m != k of another). A rung without B-frames starts two frames before one with them.
 */
function aligned(timelines: readonly SegmentTimeline[]): boolean {
  const starts = timelines.map((tl) =>
    tl.entries.flatMap((e) => Array.from({ length: e.r + 1 }, (_, k) => (e.t + k * e.d) / tl.timescale)),
  );
  const [first, ...rest] = starts;
  return rest.every((s) => s.length === first?.length && s.every((t, k) => Math.abs(t - (first[k] ?? 0)) < 1e-4));
}

function audioSet(a: DashAudio, id: number): string[] {
  return element(
    'AdaptationSet',
    {
      id,
      contentType: 'audio',
      mimeType: 'audio/mp4',
      lang: languageTag(a.lang),
      segmentAlignment: 'true',
      startWithSAP: 1,
    },
    ...(a.label ? [textElement('Label', a.label)] : []),
    // DASH-IF IOP: the track a player starts with is marked main; the others are alternates.
    element('Role', { schemeIdUri: ROLE_SCHEME, value: a.default ? 'main' : 'alternate' }),
    element(
      'Representation',
      {
        id: representationId(a.dir),
        bandwidth: Math.round(a.bandwidth),
        audioSamplingRate: a.sampleRate,
        codecs: a.codecs,
      },
      element('AudioChannelConfiguration', {
        schemeIdUri: 'urn:mpeg:dash:23003:3:audio_channel_configuration:2011',
        value: a.channels,
      }),
      segmentTemplate(a.dir, a.timeline),
    ),
  );
}

/** A whole-file WebVTT track: one Representation whose BaseURL is the file (no segments). */
function textSet(s: DashSubtitle, id: number): string[] {
  const roles = [element('Role', { schemeIdUri: ROLE_SCHEME, value: 'subtitle' })];
  if (s.default) roles.push(element('Role', { schemeIdUri: ROLE_SCHEME, value: 'main' }));
  return element(
    'AdaptationSet',
    { id, contentType: 'text', mimeType: 'text/vtt', lang: languageTag(s.lang) },
    ...(s.label ? [textElement('Label', s.label)] : []),
    ...roles,
    element(
      'Representation',
      // Named by its folder (`subtitles/2`), as audio is (`audio/0`). @bandwidth is required
      // by the schema; a text file's is nominal.
      { id: representationId(path.posix.dirname(s.uri)), bandwidth: 256 },
      textElement('BaseURL', relativeUrl(s.uri)),
    ),
  );
}

const ROLE_SCHEME = 'urn:mpeg:dash:role:2011';

function segmentTemplate(dir: string, timeline: SegmentTimeline): string[] {
  const base = relativeUrl(dir);
  let end = -1;
  const segments = timeline.entries.map((e) => {
    // @t only where a segment does not start where the previous one ended.
    const s = element('S', { t: e.t === end ? undefined : e.t, d: e.d, r: e.r || undefined });
    end = e.t + e.d * (e.r + 1);
    return s;
  });
  return element(
    'SegmentTemplate',
    {
      timescale: timeline.timescale,
      initialization: `${base}/${INIT_NAME}`,
      media: `${base}/$Number$.m4s`,
      startNumber: 0,
    },
    element('SegmentTimeline', {}, ...segments),
  );
}

/**
 * A path beside the MPD as a relative URL: each segment percent-encoded (a rendition name
 * may hold spaces), which also keeps `$` out of SegmentTemplate@media, where it would
 * start an identifier (23009-1, 5.3.9.4.4).
 */
function relativeUrl(p: string): string {
  return p.split('/').map(encodeURIComponent).join('/');
}

/** Representation@id is StringNoWhitespaceType (23009-1, 5.3.5.2). */
function representationId(name: string): string {
  return name.replace(/\s/g, '_');
}

/** Ids for names that may collide once their whitespace is replaced (`a b`, `a_b`). */
function uniqueIds(names: readonly string[]): string[] {
  const seen = new Set<string>();
  return names.map((name) => {
    let id = representationId(name);
    for (let n = 2; seen.has(id); n++) id = `${representationId(name)}-${n}`;
    seen.add(id);
    return id;
  });
}

/** @lang is an RFC 5646 tag (xs:language); anything else is left out rather than written invalid. */
function languageTag(lang: string | undefined): string | undefined {
  return lang && /^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*$/.test(lang) && lang.toLowerCase() !== 'und' ? lang : undefined;
}

function frameRate(fps: Rational): string {
  return fps.den === 1 ? String(fps.num) : `${fps.num}/${fps.den}`;
}

/** xs:duration in seconds, e.g. PT7.021S (players read seconds above 59 as written). */
function xsDuration(seconds: number): string {
  return `PT${Number(seconds.toFixed(3))}S`;
}

type Attributes = Record<string, string | number | undefined>;

/** An element as indented lines; attributes left undefined are not written. */
function element(name: string, attrs: Attributes, ...children: string[][]): string[] {
  const written = Object.entries(attrs)
    .filter((entry): entry is [string, string | number] => entry[1] !== undefined)
    .map(([k, v]) => ` ${k}="${escapeXml(String(v))}"`)
    .join('');
  if (children.length === 0) return [`<${name}${written} />`];
  return [`<${name}${written}>`, ...children.flat().map((line) => `  ${line}`), `</${name}>`];
}

function textElement(name: string, text: string): string[] {
  return [`<${name}>${escapeXml(text)}</${name}>`];
}

const XML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => XML_ESCAPES[c] ?? c);
}
