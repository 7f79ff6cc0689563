// HLS playlists (RFC 8216): reading the media playlists ffmpeg writes, writing the master.

export interface MediaSegment {
  uri: string;
  duration: number;
}

export interface MediaPlaylist {
  targetDuration: number;
  segments: MediaSegment[];
  /** The init segment of an fMP4 playlist (#EXT-X-MAP). */
  map: string | undefined;
  ended: boolean;
  /** #EXT-X-PLAYLIST-TYPE: VOD, EVENT, or undefined when absent. */
  type: string | undefined;
}

export function parseMediaPlaylist(text: string): MediaPlaylist {
  const out: MediaPlaylist = { targetDuration: 0, segments: [], map: undefined, ended: false, type: undefined };
  let pending: number | undefined;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line.startsWith('#EXT-X-TARGETDURATION:')) out.targetDuration = Number(line.slice(22));
    else if (line.startsWith('#EXTINF:')) pending = Number.parseFloat(line.slice(8));
    else if (line.startsWith('#EXT-X-MAP:')) out.map = /URI="([^"]+)"/.exec(line)?.[1];
    else if (line === '#EXT-X-ENDLIST') out.ended = true;
    else if (line.startsWith('#EXT-X-PLAYLIST-TYPE:')) out.type = line.slice(21);
    else if (line !== '' && !line.startsWith('#') && pending !== undefined) {
      out.segments.push({ uri: line, duration: pending });
      pending = undefined;
    }
  }
  return out;
}

/**
 * A media playlist as published (issue #30: one writer for the single run and the stitch).
 * Finished (`ended`), it is a VOD playlist (RFC 8216 4.3.3.5); a chunked run publishes the
 * segments done so far as an EVENT playlist first, which players may start on. ffmpeg ran
 * its own lists as EVENT playlists, because its HLS muxer writes a VOD one only at the very
 * end and the segment watcher needs the list as it grows. EXT-X-TARGETDURATION is the
 * longest segment rounded to the nearest integer (4.3.3.1); never 0, which players reject.
 * Version 7 with an init segment (EXT-X-MAP), as ffmpeg writes it, 6 without.
 */
export function mediaPlaylist(o: {
  segments: readonly MediaSegment[];
  map?: string | undefined;
  ended: boolean;
}): string {
  const target = Math.max(1, Math.round(Math.max(0, ...o.segments.map((s) => s.duration))));
  const lines = [
    '#EXTM3U',
    `#EXT-X-VERSION:${o.map ? 7 : 6}`,
    `#EXT-X-TARGETDURATION:${target}`,
    '#EXT-X-MEDIA-SEQUENCE:0',
    `#EXT-X-PLAYLIST-TYPE:${o.ended ? 'VOD' : 'EVENT'}`,
    '#EXT-X-INDEPENDENT-SEGMENTS',
  ];
  if (o.map) lines.push(`#EXT-X-MAP:URI="${o.map}"`);
  for (const s of o.segments) lines.push(`#EXTINF:${s.duration.toFixed(6)},`, s.uri);
  if (o.ended) lines.push('#EXT-X-ENDLIST');
  return `${lines.join('\n')}\n`;
}

/** A playlist ffmpeg wrote, as published: mediaPlaylist() over its segments (`durations` as they were measured). */
export function finalPlaylist(text: string, durations: readonly number[]): string {
  const p = parseMediaPlaylist(text);
  const segments = p.segments.map((s, i) => ({ uri: s.uri, duration: durations[i] ?? s.duration }));
  return mediaPlaylist({ segments, map: p.map, ended: true });
}

export interface Variant {
  /** Relative URI of the rendition's playlist, e.g. `360p0/index.m3u8`. */
  uri: string;
  /** Peak segment bitrate, bits per second (RFC 8216 4.3.4.2), its audio group's included. */
  bandwidth: number;
  averageBandwidth: number;
  /** Absent for an audio-only variant. */
  video?: { width: number; height: number; frameRate: number };
  /** Every codec of the variant, its audio group's included (4.3.4.2). */
  codecs: string;
}

/** An EXT-X-MEDIA rendition: an alternate audio track or a subtitle track (4.3.4.1). */
export interface MediaRendition {
  type: 'AUDIO' | 'SUBTITLES';
  uri: string;
  name: string;
  language: string | undefined;
  default: boolean;
  forced?: boolean;
  /** Audio channels, e.g. 2. */
  channels?: number;
}

export const AUDIO_GROUP = 'audio';
export const SUBTITLES_GROUP = 'subs';

/**
 * The master playlist, variants listed by bandwidth, lowest first. Alternate audio and
 * subtitle renditions form one group each, which every variant names.
 */
export function masterPlaylist(
  variants: readonly Variant[],
  media: readonly MediaRendition[],
  independentSegments: boolean,
): string {
  const lines = ['#EXTM3U', '#EXT-X-VERSION:6'];
  if (independentSegments) lines.push('#EXT-X-INDEPENDENT-SEGMENTS');
  for (const m of media) lines.push(mediaLine(m));
  const hasAudio = media.some((m) => m.type === 'AUDIO');
  const hasSubs = media.some((m) => m.type === 'SUBTITLES');
  for (const v of [...variants].sort((a, b) => a.bandwidth - b.bandwidth)) {
    const attrs = [`BANDWIDTH=${Math.round(v.bandwidth)}`, `AVERAGE-BANDWIDTH=${Math.round(v.averageBandwidth)}`];
    if (v.video) attrs.push(`RESOLUTION=${v.video.width}x${v.video.height}`);
    attrs.push(`CODECS="${v.codecs}"`);
    if (v.video) attrs.push(`FRAME-RATE=${v.video.frameRate.toFixed(3)}`);
    if (hasAudio) attrs.push(`AUDIO="${AUDIO_GROUP}"`);
    if (hasSubs) attrs.push(`SUBTITLES="${SUBTITLES_GROUP}"`);
    lines.push(`#EXT-X-STREAM-INF:${attrs.join(',')}`, v.uri);
  }
  return `${lines.join('\n')}\n`;
}

function mediaLine(m: MediaRendition): string {
  const attrs = [
    `TYPE=${m.type}`,
    `GROUP-ID="${m.type === 'AUDIO' ? AUDIO_GROUP : SUBTITLES_GROUP}"`,
    `NAME="${quoted(m.name)}"`,
  ];
  if (m.language) attrs.push(`LANGUAGE="${quoted(m.language)}"`);
  attrs.push(`DEFAULT=${m.default ? 'YES' : 'NO'}`, `AUTOSELECT=YES`);
  if (m.type === 'SUBTITLES' && m.forced) attrs.push('FORCED=YES');
  if (m.channels) attrs.push(`CHANNELS="${m.channels}"`);
  attrs.push(`URI="${quoted(m.uri)}"`);
  return `#EXT-X-MEDIA:${attrs.join(',')}`;
}

/** A quoted-string may hold neither a double quote nor a line break (4.2). */
function quoted(s: string): string {
  return s.replace(/["\r\n]/g, "'");
}

/** The media playlist of a subtitle track: its one WebVTT file over the whole duration. */
export function subtitlePlaylist(vttUri: string, duration: number): string {
  return [
    '#EXTM3U',
    '#EXT-X-VERSION:6',
    `#EXT-X-TARGETDURATION:${Math.max(1, Math.ceil(duration))}`,
    '#EXT-X-MEDIA-SEQUENCE:0',
    '#EXT-X-PLAYLIST-TYPE:VOD',
    `#EXTINF:${duration.toFixed(6)},`,
    vttUri,
    '#EXT-X-ENDLIST',
    '',
  ].join('\n');
}

/**
 * A WebVTT file as HLS players read it: X-TIMESTAMP-MAP ties cue times to the media's
 * timestamps (RFC 8216 3.5); ffmpeg's segments start at media time 0.
 */
export function withTimestampMap(vtt: string): string {
  if (vtt.includes('X-TIMESTAMP-MAP')) return vtt;
  return vtt.replace(/^(\uFEFF?WEBVTT[^\n]*)\n/, '$1\nX-TIMESTAMP-MAP=MPEGTS=0,LOCAL=00:00:00.000\n');
}
