import { execFile } from 'node:child_process';
import { createReadStream, statSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import type http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseMediaPlaylist } from '../../src/transcode/playlist.ts';
import { cachedMedia } from './media-cache.ts';
import type { TestS3 } from './s3.ts';

// What issue #30's acceptance reads of an output (chunked or not), from ffprobe's packet
// timestamps rather than from the service's own parsers: a long test input, each segment's
// span on the media timeline, the seams between segments, a DASH manifest's timeline, the end
// of audio against video, and VMAF over windows of a few seconds (the meter does ~4 frames/s).

const run = promisify(execFile);
const VMAF = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../shared/vmaf/vmaf.sh');

/**
 * A long clip with audio, made once per run (media-cache.ts, removed when the run ends):
 * testsrc2, whose moving picture and frame counter make a repeated or dropped frame visible to
 * VMAF, and a 440 Hz tone that beeps every second. x264's default GOP (250 frames) and the
 * moov at the end, as a camera file has them: a chunk starts between keyframes and the reader
 * must seek to the end for the index. `surround` adds a second audio track in 5.1 (a tone of
 * its own on each channel), as a film has a stereo and a 5.1 mix.
 */
export function makeLongClip(o: {
  width: number;
  height: number;
  seconds: number;
  fps?: number;
  surround?: boolean;
}): Promise<string> {
  const fps = o.fps ?? 30;
  const tracks = o.surround ? '-stereo-5.1' : '';
  return cachedMedia(`long-${o.width}x${o.height}-${o.seconds}s-${fps}fps${tracks}.mp4`, async (tmp) => {
    const tones = [220, 277, 330, 110, 392, 440].map((hz) => `0.2*sin(2*PI*${hz}*t)`).join('|');
    const surround = o.surround
      ? [...['-f', 'lavfi', '-i', `aevalsrc=exprs=${tones}:channel_layout=5.1:sample_rate=48000`]]
      : [];
    const maps = o.surround ? ['-map', '0:v', '-map', '1:a', '-map', '2:a'] : [];
    // After the shared -b:a, which would override them: the first track in stereo, the 5.1 at a 5.1 rate.
    const perTrack = o.surround ? ['-ac:a:0', '2', '-b:a:1', '256k'] : [];
    await run('ffmpeg', [
      ...['-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=size=${o.width}x${o.height}:rate=${fps}`],
      ...['-f', 'lavfi', '-i', 'sine=frequency=440:beep_factor=4:sample_rate=48000'],
      ...surround,
      ...maps,
      ...['-t', String(o.seconds), '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p'],
      ...['-c:a', 'aac', '-b:a', '96k', ...perTrack, tmp],
    ]);
  });
}

/**
 * A file served as a web server or CDN serves it, with `Accept-Ranges: bytes` and 206 answers
 * to a single `Range: bytes=a-b` (issue #30: a chunk reads only its range). `served` counts the
 * bytes sent, so a test can tell ranged reads from a whole download.
 */
export function serveRanges(
  file: string,
  contentType = 'video/mp4',
): {
  route: (req: http.IncomingMessage, res: http.ServerResponse) => void;
  served: { bytes: number; requests: number };
} {
  const served = { bytes: 0, requests: 0 };
  const route = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const size = statSync(file).size;
    const m = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range ?? '');
    let [start, end] = [0, size - 1];
    if (m && (m[1] || m[2])) {
      start = m[1] ? Number(m[1]) : Math.max(0, size - Number(m[2]));
      end = m[1] && m[2] ? Math.min(Number(m[2]), size - 1) : size - 1;
      if (start >= size || start > end) {
        res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
        return;
      }
    }
    const headers = { 'content-type': contentType, 'accept-ranges': 'bytes', 'content-length': end - start + 1 };
    res.writeHead(m ? 206 : 200, m ? { ...headers, 'content-range': `bytes ${start}-${end}/${size}` } : headers);
    served.requests++;
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    const stream = createReadStream(file, { start, end, highWaterMark: 1 << 20 });
    stream.on('data', (b) => {
      served.bytes += b.length;
    });
    stream.pipe(res);
    res.on('close', () => stream.destroy());
  };
  return { route, served };
}

/** Every object of `bucket` under `prefix` into `dir`, keeping the keys' folders. */
export async function downloadBucket(s3: TestS3, bucket: string, dir: string, prefix = ''): Promise<string[]> {
  const keys = (await s3.keys(bucket)).filter((k) => k.startsWith(prefix));
  for (const key of keys) {
    const file = path.join(dir, key);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, (await s3.get(bucket, key)).body);
  }
  return keys;
}

/** Where a stream's packets lie on the timeline: first presentation, end of the last, how many. */
export interface Span {
  start: number;
  end: number;
  packets: number;
}

/** Presentation times of every packet of a stream, sorted: for gaps inside one file (an MP4). */
export async function packetTimes(file: string, kind: 'v' | 'a'): Promise<{ pts: number; duration: number }[]> {
  const { stdout } = await run(
    'ffprobe',
    [
      '-v',
      'error',
      '-select_streams',
      `${kind}:0`,
      '-show_entries',
      'packet=pts_time,duration_time',
      '-of',
      'csv=p=0',
      file,
    ],
    { maxBuffer: 256 << 20 },
  );
  return csvPackets(stdout).sort((a, b) => a.pts - b.pts);
}

/** The span of `file`'s first video (`v`) or audio (`a`) stream, from ffprobe's packets. */
export async function packetSpan(file: string, kind: 'v' | 'a'): Promise<Span> {
  const packets = await packetTimes(file, kind);
  if (packets.length === 0) throw new Error(`${file}: no ${kind === 'v' ? 'video' : 'audio'} packets`);
  let end = Number.NEGATIVE_INFINITY;
  for (const { pts, duration } of packets) end = Math.max(end, pts + duration);
  return { start: packets[0]?.pts ?? 0, end, packets: packets.length };
}

/** ffprobe's `pts_time,duration_time,` lines (blank lines between, N/A for a packet without a time) as numbers. */
function csvPackets(stdout: string): { pts: number; duration: number }[] {
  const out: { pts: number; duration: number }[] = [];
  for (const line of stdout.split('\n')) {
    const [pts = '', duration = ''] = line.split(',');
    if (!/^-?\d/.test(pts)) continue;
    out.push({ pts: Number(pts), duration: /^\d/.test(duration) ? Number(duration) : 0 });
  }
  return out;
}

/** Gaps or overlaps between consecutive packets beyond `tolerance` seconds: "at 30.03: gap 0.067 s". */
export function packetGaps(packets: readonly { pts: number; duration: number }[], tolerance: number): string[] {
  const out: string[] = [];
  for (let i = 1; i < packets.length; i++) {
    const prev = packets[i - 1];
    const cur = packets[i];
    if (!prev || !cur) continue;
    const d = cur.pts - (prev.pts + prev.duration);
    if (Math.abs(d) > tolerance)
      out.push(`at ${cur.pts.toFixed(3)}: ${d > 0 ? 'gap' : 'overlap'} ${Math.abs(d).toFixed(4)} s`);
  }
  return out;
}

export interface SegmentSpan extends Span {
  uri: string;
  /** The playlist's EXTINF. */
  extinf: number;
}

/** A media playlist (local copy) and each of its segments' spans: fMP4 segments read behind their init segment. */
export async function segmentSpans(
  playlist: string,
  kind: 'v' | 'a',
): Promise<{ targetDuration: number; ended: boolean; segments: SegmentSpan[] }> {
  const dir = path.dirname(playlist);
  const parsed = parseMediaPlaylist(await readFile(playlist, 'utf8'));
  const init = parsed.map ? await readFile(path.join(dir, parsed.map)) : undefined;
  const segments: SegmentSpan[] = [];
  for (const s of parsed.segments) {
    const file = path.join(dir, s.uri);
    let probed = file;
    if (init) {
      probed = `${file}.joined.mp4`;
      await writeFile(probed, Buffer.concat([init, await readFile(file)]));
    }
    try {
      segments.push({ uri: s.uri, extinf: s.duration, ...(await packetSpan(probed, kind)) });
    } finally {
      if (init) await rm(probed, { force: true });
    }
  }
  return { targetDuration: parsed.targetDuration, ended: parsed.ended, segments };
}

/**
 * What is wrong with a media playlist's segments: one longer than EXT-X-TARGETDURATION (RFC
 * 8216 4.3.3.1: the EXTINF rounded to the nearest integer), a segment whose media is not as
 * long as its EXTINF (unless `extinf: false`), or a seam where the next segment does not start where the last one ended
 * (a gap or an overlap beyond `tolerance` seconds).
 */
export function segmentProblems(
  p: { targetDuration: number; segments: readonly SegmentSpan[] },
  tolerance: number,
  o: { extinf?: boolean } = {},
): string[] {
  const out: string[] = [];
  for (const [i, s] of p.segments.entries()) {
    if (Math.round(s.extinf) > p.targetDuration)
      out.push(`${s.uri}: EXTINF ${s.extinf} over the target ${p.targetDuration}`);
    // Audio muxed into a video segment is cut where the video is, give or take a packet.
    if (o.extinf !== false && Math.abs(s.end - s.start - s.extinf) > tolerance)
      out.push(`${s.uri}: media ${(s.end - s.start).toFixed(4)} s against EXTINF ${s.extinf}`);
    const prev = p.segments[i - 1];
    if (prev) {
      const d = s.start - prev.end;
      if (Math.abs(d) > tolerance)
        out.push(
          `${prev.uri} -> ${s.uri}: ${d > 0 ? 'gap' : 'overlap'} of ${Math.abs(d).toFixed(4)} s (${prev.end.toFixed(4)} -> ${s.start.toFixed(4)})`,
        );
    }
  }
  return out;
}

/** One Representation of an MPD: its id, the template's names and the expanded timeline in seconds. */
export interface DashRepresentation {
  id: string;
  contentType: string;
  init: string;
  media: string;
  startNumber: number;
  timescale: number;
  segments: { start: number; duration: number }[];
}

/**
 * The MPD's representations, read with a few regular expressions (the manifest ffmpeg's
 * DASH muxer and ours write: SegmentTemplate with a SegmentTimeline in each Representation or
 * its AdaptationSet). Enough for a test; not a general MPD reader.
 */
export function readMpd(xml: string): { duration: number; representations: DashRepresentation[] } {
  const duration = seconds(/mediaPresentationDuration="([^"]+)"/.exec(xml)?.[1] ?? '');
  const representations: DashRepresentation[] = [];
  for (const set of xml.matchAll(/<AdaptationSet\b([^>]*)>([\s\S]*?)<\/AdaptationSet>/g)) {
    const setAttrs = set[1] ?? '';
    const body = set[2] ?? '';
    const setTemplate = /<SegmentTemplate\b[^>]*?(?:\/>|>[\s\S]*?<\/SegmentTemplate>)/.exec(
      body.replace(/<Representation[\s\S]*/, ''),
    )?.[0];
    const contentType = attr(setAttrs, 'contentType') ?? (attr(setAttrs, 'mimeType') ?? '').split('/')[0] ?? '';
    for (const rep of body.matchAll(/<Representation\b([^>]*?)(?:\/>|>([\s\S]*?)<\/Representation>)/g)) {
      const template =
        /<SegmentTemplate\b[^>]*?(?:\/>|>[\s\S]*?<\/SegmentTemplate>)/.exec(rep[2] ?? '')?.[0] ?? setTemplate;
      if (!template) continue;
      const head = /<SegmentTemplate\b([^>]*)>/.exec(template)?.[1] ?? '';
      const timescale = Number(attr(head, 'timescale') ?? 1);
      const ticks: { t: number; d: number }[] = [];
      for (const s of template.matchAll(/<S\b([^>]*)\/>/g)) {
        const prev = ticks.at(-1);
        let t = attr(s[1] ?? '', 't') === undefined ? (prev ? prev.t + prev.d : 0) : Number(attr(s[1] ?? '', 't'));
        const d = Number(attr(s[1] ?? '', 'd'));
        for (let k = 0; k <= Number(attr(s[1] ?? '', 'r') ?? 0); k++, t += d) ticks.push({ t, d });
      }
      representations.push({
        id: attr(rep[1] ?? '', 'id') ?? '',
        contentType: attr(rep[1] ?? '', 'mimeType')?.split('/')[0] ?? contentType,
        init: attr(head, 'initialization') ?? '',
        media: attr(head, 'media') ?? '',
        startNumber: Number(attr(head, 'startNumber') ?? 1),
        timescale,
        segments: ticks.map((x) => ({ start: x.t / timescale, duration: x.d / timescale })),
      });
    }
  }
  return { duration, representations };
}

function attr(attrs: string, name: string): string | undefined {
  const v = new RegExp(`\\b${name}="([^"]*)"`).exec(attrs)?.[1];
  return v === undefined
    ? undefined
    : v
        .replace(/&amp;/g, '&')
        .replace(/&quot;/g, '"')
        .replace(/&lt;/g, '<');
}

/** 'PT3M0.02S', 'PT180.021S' in seconds. */
function seconds(xs: string): number {
  const m = /^P(?:T)?(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?$/.exec(xs);
  if (!m) return Number.NaN;
  return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
}

/** A DASH timeline's holes: an entry that does not start where the last ended (in ticks: exact). */
export function timelineProblems(rep: DashRepresentation): string[] {
  const out: string[] = [];
  for (let i = 1; i < rep.segments.length; i++) {
    const prev = rep.segments[i - 1];
    const cur = rep.segments[i];
    if (!prev || !cur) continue;
    const d = cur.start - (prev.start + prev.duration);
    if (Math.abs(d) > 0.5 / rep.timescale)
      out.push(`${rep.id} segment ${i + rep.startNumber}: ${d > 0 ? 'gap' : 'overlap'} ${Math.abs(d).toFixed(4)} s`);
  }
  return out;
}

/**
 * Mean VMAF of `dist` against `ref` over [from, from + seconds): both cut out losslessly
 * (FFV1, frame-exact input seeking) into `dir`, then /work/shared/vmaf/vmaf.sh, which scales the
 * distorted picture to the reference's size. A frame shifted at a seam shows as a drop here.
 */
export async function vmafWindow(o: {
  dist: string;
  ref: string;
  from: number;
  seconds: number;
  dir: string;
}): Promise<number> {
  const cut = async (file: string, name: string): Promise<string> => {
    const out = path.join(o.dir, `${name}-${o.from}.mkv`);
    await run('ffmpeg', [
      ...['-v', 'error', '-nostdin', '-y', '-ss', String(o.from), '-i', file, '-t', String(o.seconds)],
      ...['-an', '-c:v', 'ffv1', out],
    ]);
    return out;
  };
  const [d, r] = [await cut(o.dist, 'dist'), await cut(o.ref, 'ref')];
  try {
    const { stdout } = await run('bash', [VMAF, d, r], { maxBuffer: 1 << 20 });
    const score = Number(stdout.trim());
    if (!Number.isFinite(score)) throw new Error(`vmaf.sh printed ${stdout}`);
    return score;
  } finally {
    await Promise.all([rm(d, { force: true }), rm(r, { force: true })]);
  }
}
