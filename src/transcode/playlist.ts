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
 * The media playlist as published. ffmpeg ran it as an EVENT playlist, because its HLS muxer
 * writes a VOD playlist only at the very end and the segment watcher needs the list as it
 * grows; finished, it is a VOD playlist (RFC 8216 4.3.3.5). EXT-X-TARGETDURATION is the
 * longest segment rounded to the nearest integer (4.3.3.1); ffmpeg writes 0 for clips shorter
 * than half a second, which players reject.
 */
export function finalPlaylist(text: string, durations: number[]): string {
  const target = Math.max(1, Math.round(Math.max(0, ...durations)));
  return text
    .replace(/#EXT-X-TARGETDURATION:\d+/, `#EXT-X-TARGETDURATION:${target}`)
    .replace('#EXT-X-PLAYLIST-TYPE:EVENT', '#EXT-X-PLAYLIST-TYPE:VOD');
}

export interface Variant {
  /** Relative URI of the rendition's playlist, e.g. `360p0/index.m3u8`. */
  uri: string;
  /** Peak segment bitrate, bits per second (RFC 8216 4.3.4.2). */
  bandwidth: number;
  averageBandwidth: number;
  width: number;
  height: number;
  codecs: string;
  frameRate: number;
}

/** The master playlist, renditions listed by bandwidth, lowest first. */
export function masterPlaylist(variants: readonly Variant[], independentSegments: boolean): string {
  const lines = ['#EXTM3U', '#EXT-X-VERSION:6'];
  if (independentSegments) lines.push('#EXT-X-INDEPENDENT-SEGMENTS');
  for (const v of [...variants].sort((a, b) => a.bandwidth - b.bandwidth)) {
    const attrs = [
      `BANDWIDTH=${Math.round(v.bandwidth)}`,
      `AVERAGE-BANDWIDTH=${Math.round(v.averageBandwidth)}`,
      `RESOLUTION=${v.width}x${v.height}`,
      `CODECS="${v.codecs}"`,
      `FRAME-RATE=${v.frameRate.toFixed(3)}`,
    ];
    lines.push(`#EXT-X-STREAM-INF:${attrs.join(',')}`, v.uri);
  }
  return `${lines.join('\n')}\n`;
}
