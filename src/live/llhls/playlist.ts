// Playlist text of low-latency HLS (Apple's HLS, RFC 8216bis: draft-pantos-hls-rfc8216bis):
// the media playlist of one rendition and the multivariant playlist of a ladder. Pure
// functions of what the renditions hold, so they are tested as text.

import { initName, partName, segmentName } from './names.ts';

/**
 * EXT-X-MAP in a media playlist without EXT-X-I-FRAMES-ONLY needs protocol version 6
 * (RFC 8216bis, section 8); no other tag used here asks for more (EXT-X-SKIP, which needs 9, is not used).
 */
const PROTOCOL_VERSION = 6;

export interface PlaylistPart {
  duration: number;
  /** Starts with a sync sample (INDEPENDENT=YES). */
  independent: boolean;
}

export interface PlaylistSegment {
  msn: number;
  /** The ffmpeg run that wrote it: its init is init-{run}.mp4. */
  run: number;
  /** An EXT-X-DISCONTINUITY precedes it (a new run). */
  discontinuity: boolean;
  /** Wall clock (ms) of its first part's arrival: EXT-X-PROGRAM-DATE-TIME. */
  programDateTime: number;
  /** Media seconds (sum of its parts). */
  duration: number;
  /** Whole: listed with EXTINF. The last segment may be open (parts only). */
  complete: boolean;
  parts: readonly PlaylistPart[];
}

export interface RenditionReport {
  name: string;
  lastMsn: number;
  lastPart: number;
}

export interface MediaPlaylistView {
  segments: readonly PlaylistSegment[];
  discontinuitySequence: number;
  /** EXT-X-TARGETDURATION: whole seconds, at least every segment's duration. */
  targetDuration: number;
  partTargetSecs: number;
  ended: boolean;
  /** The next part, when one is expected: EXT-X-PRELOAD-HINT. */
  preloadHint?: { msn: number; part: number } | undefined;
  reports: readonly RenditionReport[];
  /** Appended to every URI (`jwt=...`), without the `?`. */
  uriQuery?: string | undefined;
}

/**
 * RFC 8216bis, 6.2.2: EXT-X-PART tags SHOULD be removed once they are more than three
 * target durations from the end of the playlist; older segments are listed whole only.
 */
const PART_LISTING_TARGET_DURATIONS = 3;

/** PART-HOLD-BACK: at least twice the part target, and SHOULD be three times (RFC 8216bis, 4.4.3.8). */
export const PART_HOLD_BACK_PARTS = 3;

export function mediaPlaylist(view: MediaPlaylistView): string {
  const q = querySuffix(view.uriQuery);
  const first = view.segments[0];
  const lines = [
    '#EXTM3U',
    `#EXT-X-VERSION:${PROTOCOL_VERSION}`,
    `#EXT-X-TARGETDURATION:${view.targetDuration}`,
    `#EXT-X-PART-INF:PART-TARGET=${decimal(view.partTargetSecs)}`,
    `#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=${decimal(PART_HOLD_BACK_PARTS * view.partTargetSecs)}`,
    `#EXT-X-MEDIA-SEQUENCE:${first?.msn ?? 0}`,
  ];
  if (view.discontinuitySequence > 0) lines.push(`#EXT-X-DISCONTINUITY-SEQUENCE:${view.discontinuitySequence}`);
  const listPartsFrom = partsListedFrom(view);
  let run: number | undefined;
  for (const segment of view.segments) {
    if (segment.discontinuity && segment !== first) lines.push('#EXT-X-DISCONTINUITY');
    if (segment.run !== run) {
      lines.push(`#EXT-X-MAP:URI="${initName(segment.run)}${q}"`);
      run = segment.run;
    }
    lines.push(`#EXT-X-PROGRAM-DATE-TIME:${new Date(segment.programDateTime).toISOString()}`);
    if (segment.msn >= listPartsFrom) lines.push(...partLines(segment, q));
    if (segment.complete) lines.push(`#EXTINF:${decimal(segment.duration)},`, `${segmentName(segment.msn)}${q}`);
  }
  if (view.preloadHint !== undefined && !view.ended) {
    const { msn, part } = view.preloadHint;
    lines.push(`#EXT-X-PRELOAD-HINT:TYPE=PART,URI="${partName(msn, part)}${q}"`);
  }
  for (const report of view.reports) {
    lines.push(
      `#EXT-X-RENDITION-REPORT:URI="../${report.name}/index.m3u8${q}",LAST-MSN=${report.lastMsn},LAST-PART=${report.lastPart}`,
    );
  }
  if (view.ended) lines.push('#EXT-X-ENDLIST');
  return `${lines.join('\n')}\n`;
}

function partLines(segment: PlaylistSegment, q: string): string[] {
  return segment.parts.map(
    (part, index) =>
      `#EXT-X-PART:DURATION=${decimal(part.duration)},URI="${partName(segment.msn, index)}${q}"` +
      (part.independent ? ',INDEPENDENT=YES' : ''),
  );
}

/** The first msn whose parts are listed: those starting within three target durations of the end. */
function partsListedFrom(view: MediaPlaylistView): number {
  const horizon = PART_LISTING_TARGET_DURATIONS * view.targetDuration;
  let fromEnd = 0;
  let from = Number.POSITIVE_INFINITY;
  for (let i = view.segments.length - 1; i >= 0; i--) {
    const segment = view.segments[i] as PlaylistSegment;
    fromEnd += segment.duration;
    if (fromEnd > horizon && from !== Number.POSITIVE_INFINITY) break;
    from = segment.msn;
  }
  return from;
}

export interface VariantInfo {
  name: string;
  /** Peak bits per second (EXT-X-STREAM-INF BANDWIDTH). */
  bandwidth: number;
  width?: number | undefined;
  height?: number | undefined;
  codecs?: string | undefined;
  frameRate?: number | undefined;
}

/** The multivariant playlist of a ladder: one EXT-X-STREAM-INF per rendition's `NAME/index.m3u8`. */
export function multivariantPlaylist(variants: readonly VariantInfo[], uriQuery?: string): string {
  const q = querySuffix(uriQuery);
  // Every segment starts with a keyframe (a keyframe starts each segment): RFC 8216bis, 4.4.2.1.
  const lines = ['#EXTM3U', `#EXT-X-VERSION:${PROTOCOL_VERSION}`, '#EXT-X-INDEPENDENT-SEGMENTS'];
  for (const v of variants) {
    const attributes = [`BANDWIDTH=${Math.round(v.bandwidth)}`];
    if (v.width !== undefined && v.height !== undefined) attributes.push(`RESOLUTION=${v.width}x${v.height}`);
    if (v.codecs !== undefined) attributes.push(`CODECS="${v.codecs}"`);
    if (v.frameRate !== undefined && v.frameRate > 0) attributes.push(`FRAME-RATE=${v.frameRate.toFixed(3)}`);
    lines.push(`#EXT-X-STREAM-INF:${attributes.join(',')}`, `${v.name}/index.m3u8${q}`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * `?query` for the URIs of a playlist. Characters that could end a quoted attribute or a line
 * (a `"`, a newline) are percent-encoded: the query is the viewer's, the playlist is ours.
 */
function querySuffix(query: string | undefined): string {
  if (query === undefined || query === '') return '';
  const bare = query.startsWith('?') ? query.slice(1) : query;
  return `?${bare.replace(/[^A-Za-z0-9\-._~=&%+/:]/g, (c) => encodeURIComponent(c))}`;
}

/** Seconds with up to 5 decimals, no trailing zeros beyond the first (1.0, 0.26667). */
function decimal(secs: number): string {
  const fixed = secs.toFixed(5).replace(/0+$/, '');
  return fixed.endsWith('.') ? `${fixed}0` : fixed;
}

/**
 * A playlist written without a query (a remote node's, fetched for a viewer) with `uriQuery`
 * appended to every URI, as if written with it: the URI lines and the quoted URI attributes
 * (EXT-X-MAP, EXT-X-PART, EXT-X-PRELOAD-HINT, EXT-X-RENDITION-REPORT; RFC 8216bis, 4.4).
 */
export function withUriQuery(playlist: string, uriQuery: string | undefined): string {
  const q = querySuffix(uriQuery);
  if (q === '') return playlist;
  return playlist
    .split('\n')
    .map((line) => {
      if (line === '') return line;
      if (!line.startsWith('#')) return `${line}${q}`;
      return line.replace(/URI="([^"]*)"/g, (_, uri: string) => `URI="${uri}${q}"`);
    })
    .join('\n');
}
