import { inputArgs, readHead } from './media-input.ts';
import { runProcess } from './run.ts';

interface Stream {
  codec_type?: string;
  codec_name?: string;
  profile?: string;
  level?: number;
  pix_fmt?: string;
  width?: number;
  height?: number;
  avg_frame_rate?: string;
}

/** How much of a file is read for its codec configuration boxes: an init segment is ~1-2 KiB. */
const HEAD_BYTES = 64 * 1024;

/**
 * The CODECS attribute of a variant (RFC 6381 strings, RFC 8216 4.3.4.2), read from one of
 * its own segments so it says what the encoder really produced.
 */
async function codecsOf(file: string, opts: { ffprobePath: string; signal: AbortSignal }): Promise<string> {
  const args = [
    '-v',
    'error',
    '-print_format',
    'json',
    '-show_entries',
    'stream=codec_type,codec_name,profile,level,pix_fmt,width,height,avg_frame_rate',
    ...inputArgs(file, 'ours'),
  ];
  const [res, head] = await Promise.all([
    runProcess(opts.ffprobePath, args, { signal: opts.signal, timeoutMs: 60_000, collectStdout: true }),
    readHead(file, HEAD_BYTES),
  ]);
  let streams: Stream[] = [];
  try {
    streams = (JSON.parse(res.stdout) as { streams?: Stream[] }).streams ?? [];
  } catch {
    // fall through to the defaults below
  }
  const codecs = streams.map((s) => codecString(s, head)).filter((c): c is string => c !== undefined);
  return codecs.length > 0 ? codecs.join(',') : 'avc1.640028,mp4a.40.2';
}

/**
 * CODECS per rendition, probed from its first segment (or fMP4 init segment) once the encoder
 * has written it: the ffprobe runs beside the encode instead of in the serial tail between the
 * last segment and the master playlist. Each rendition directory is probed once.
 */
export class CodecsProbes {
  readonly #started = new Map<string, Promise<string>>();
  readonly #opts: { ffprobePath: string; signal: AbortSignal };
  constructor(opts: { ffprobePath: string; signal: AbortSignal }) {
    this.#opts = opts;
  }

  /** The CODECS of the rendition whose files are in `dir`, probing `sample` if not yet started. */
  of(dir: string, sample: string): Promise<string> {
    let p = this.#started.get(dir);
    if (!p) {
      p = codecsOf(sample, this.#opts);
      // Started early, awaited later: a failure must not count as unhandled in between.
      p.catch(() => undefined);
      this.#started.set(dir, p);
    }
    return p;
  }
}

/**
 * One stream's RFC 6381 string. AV1 and VP9 are read from the file's own configuration box
 * (`av1C`, `vpcC`, in `head`, the file's first bytes) where there is one: ffprobe leaves a
 * VP9 init segment's profile and level unknown. Without it: ffprobe's fields, then the
 * lowest level the picture size fits.
 */
export function codecString(s: Stream, head: Uint8Array = new Uint8Array()): string | undefined {
  switch (s.codec_name) {
    case 'aac':
      return 'mp4a.40.2';
    case 'h264': {
      const level = (s.level && s.level > 0 ? s.level : 40).toString(16).padStart(2, '0');
      const p = s.profile ?? 'High';
      // profile_idc and constraint flags: Constrained Baseline 42E0, Main 4D40, High 6400.
      const idc = /Baseline/.test(p) ? '42E0' : /Main/.test(p) ? '4D40' : '6400';
      return `avc1.${idc}${level}`.toUpperCase().replace('AVC1', 'avc1');
    }
    case 'hevc': {
      const level = s.level && s.level > 0 ? s.level : 120;
      return /10/.test(s.profile ?? '') ? `hvc1.2.4.L${level}.B0` : `hvc1.1.6.L${level}.B0`;
    }
    case 'av1':
      return av1String(s, head);
    case 'vp9':
      return vp9String(s, head);
    default:
      return undefined;
  }
}

const two = (n: number): string => String(n).padStart(2, '0');

/** `av01.P.LLT.DD` (AV1 Codec ISO Media File Format Binding, "Codecs Parameter String"). */
function av1String(s: Stream, head: Uint8Array): string {
  const box = findBox(head, 'av1C', 4);
  if (box) {
    // AV1CodecConfigurationRecord: marker|version, seq_profile(3) seq_level_idx_0(5),
    // seq_tier_0(1) high_bitdepth(1) twelve_bit(1) ...
    const [, b1 = 0, b2 = 0] = box;
    const depth = b2 & 0x40 ? (b2 & 0x20 ? 12 : 10) : 8;
    return `av01.${b1 >> 5}.${two(b1 & 0x1f)}${b2 & 0x80 ? 'H' : 'M'}.${two(depth)}`;
  }
  const profile = /High/.test(s.profile ?? '') ? 1 : /Professional/.test(s.profile ?? '') ? 2 : 0;
  const level = s.level !== undefined && s.level >= 0 && s.level <= 31 ? s.level : levelFor(AV1_LEVELS, s);
  return `av01.${profile}.${two(level)}M.${two(bitDepth(s))}`;
}

/** `vp09.PP.LL.DD` (VP Codec ISO Media File Format Binding, "Codecs Parameter String"). */
function vp9String(s: Stream, head: Uint8Array): string {
  // vpcC is a FullBox: version, flags(3), profile, level, bitDepth(4) chroma(3) fullRange(1).
  const box = findBox(head, 'vpcC', 7);
  const [, , , , profile, level, depth] = box ?? [];
  if (profile !== undefined && level && depth !== undefined)
    return `vp09.${two(profile)}.${two(level)}.${two(depth >> 4)}`;
  const fromProbe = Number(/Profile (\d)/.exec(s.profile ?? '')?.[1] ?? 0);
  return `vp09.${two(fromProbe)}.${two(levelFor(VP9_LEVELS, s))}.${two(bitDepth(s))}`;
}

function bitDepth(s: Stream): number {
  const m = /p(10|12)(le|be)?$/.exec(s.pix_fmt ?? '');
  return m ? Number(m[1]) : 8;
}

/**
 * The payload of the first box of type `type` in `bytes` with at least `min` bytes: a scan,
 * not a parse of the box tree (init segments and faststart MP4s have their sample entries
 * near the start; the type must sit behind a size that fits).
 */
function findBox(bytes: Uint8Array, type: string, min: number): Uint8Array | undefined {
  const tag = Buffer.from(type, 'latin1');
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = buf.indexOf(tag, 4); at >= 4; at = buf.indexOf(tag, at + 1)) {
    const size = buf.readUInt32BE(at - 4);
    const payload = buf.subarray(at + 4, at - 4 + size);
    if (size >= 8 + min && payload.length === size - 8) return payload;
  }
  return undefined;
}

/** [level code, largest picture in luma samples, luma samples per second]. */
type LevelTable = readonly (readonly [number, number, number])[];

// AV1 spec Annex A.3 (seq_level_idx, MaxPicSize, MaxDisplayRate).
const AV1_LEVELS: LevelTable = [
  [0, 147456, 4423680],
  [1, 278784, 8363520],
  [4, 665856, 19975680],
  [5, 1065024, 31950720],
  [8, 2359296, 70778880],
  [9, 2359296, 141557760],
  [12, 8912896, 267386880],
  [13, 8912896, 534773760],
  [14, 8912896, 1069547520],
  [16, 35651584, 1069547520],
  [17, 35651584, 2139095040],
  [18, 35651584, 4278190080],
];

// VP9 levels (webmproject.org/vp9/levels: level x 10, max picture size, max luma sample rate).
const VP9_LEVELS: LevelTable = [
  [10, 36864, 829440],
  [11, 73728, 2764800],
  [20, 122880, 4608000],
  [21, 245760, 9216000],
  [30, 552960, 20736000],
  [31, 983040, 36864000],
  [40, 2228224, 83558400],
  [41, 2228224, 160432128],
  [50, 8912896, 311951360],
  [51, 8912896, 588251136],
  [52, 8912896, 1176502272],
  [60, 35651584, 1176502272],
  [61, 35651584, 2353004544],
  [62, 35651584, 4706009088],
];

/** The lowest level the picture fits at its frame rate (30 fps where ffprobe gives none that is plausible). */
function levelFor(table: LevelTable, s: Stream): number {
  const pixels = (s.width ?? 1920) * (s.height ?? 1080);
  const m = /^(\d+)\/(\d+)$/.exec(s.avg_frame_rate ?? '');
  const fps = m && Number(m[2]) > 0 ? Number(m[1]) / Number(m[2]) : 0;
  const rate = pixels * (fps > 0 && fps <= 240 ? fps : 30);
  const fit = table.find(([, maxPic, maxRate]) => pixels <= maxPic && rate <= maxRate);
  return (fit ?? table[table.length - 1] ?? [0])[0];
}
