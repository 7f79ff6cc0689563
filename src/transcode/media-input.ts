import { open } from 'node:fs/promises';
import { InternalError, UnsupportedMediaError } from '../lib/errors.ts';

// The one door through which ffmpeg and ffprobe open a file (STYLE.md: untrusted input meets
// tools through one door). ffmpeg picks a demuxer by a file's content, whatever its name, and
// some demuxers open what the file names: an HLS or DASH playlist its variants and segments
// (any path on the disk, any host past the address guard, with ffmpeg's own HTTP client), a
// concat list its entries, an image2 pattern a numbered series. So every input gets an
// explicit list of the demuxers it may be read by and of the protocols it may use; ffmpeg
// hands both on to every nested open. `runProcess` refuses a command line with an input
// that lacks them, so no call can forget them.

/** Who wrote a file that ffmpeg opens, which says what it may be. */
export type InputOrigin =
  | 'user'
  | 'ours'
  | 'our-concat'
  | 'our-adts'
  | 'our-tiles'
  | 'live-srt'
  | 'live-flv'
  | 'live-fmp4';

// The containers a user's video may come in: every demuxer here reads its one file and opens
// nothing else (the mp4 demuxer's external data references, `enable_drefs`, stay off: its
// default). Never hls, dash, concat, imf, sdp, tty, bin, image2*, *_pipe, libopenmpt, libgme,
// webm_dash_manifest: those open other files or read any bytes as pictures or text.
const USER_FORMATS = [
  ...['mov', 'matroska', 'mpegts', 'mpeg', 'avi', 'flv', 'live_flv', 'mxf', 'ogg', 'asf', 'nut', 'dv'],
  // Elementary streams a camera, an encoder or a screen recorder writes bare.
  ...['h264', 'hevc', 'm4v', 'mpegvideo', 'ivf', 'obu', 'yuv4mpegpipe', 'gif'],
  // Audio: an audio-only asset is a podcast or a track.
  ...['wav', 'w64', 'mp3', 'aac', 'ac3', 'eac3', 'flac', 'aiff', 'caf', 'amr'],
];

/** What the service's own encodes write and later read back (segments, MP4 parts, clip parts). */
const OUR_FORMATS = ['mov', 'mpegts'];

interface InputProfile {
  formats: readonly string[];
  /** Options before the input: the concat lists we write are named by `-f`, never guessed. */
  lead: readonly string[];
  /** A live input's protocols: its source is a URL of ours on loopback, given as is (not a file). */
  protocols?: readonly string[];
}

const PROFILES = {
  user: { formats: USER_FORMATS, lead: [] },
  ours: { formats: OUR_FORMATS, lead: [] },
  // A list we wrote, naming files we wrote by absolute path; its entries inherit the lists, so
  // they may only be our own formats, never another list.
  'our-concat': { formats: ['concat', ...OUR_FORMATS], lead: ['-f', 'concat', '-safe', '0'] },
  // An audio piece's kept AAC packets (chunked/audio-adts.ts): one ADTS stream, named by `-f`.
  'our-adts': { formats: ['aac'], lead: ['-f', 'aac'] },
  // A split run's storyboard tiles (storyboard.ts): raw pictures our chunks wrote, their size
  // and pixel format given before it, nothing to probe.
  'our-tiles': { formats: ['rawvideo'], lead: ['-f', 'rawvideo'] },
  // An SRT publish that live/srt/'s relay forwards to a remux ffmpeg listening on loopback:
  // MPEG-TS over SRT (libsrt speaks UDP itself), nothing else.
  'live-srt': { formats: ['mpegts'], lead: ['-f', 'mpegts'], protocols: ['srt'] },
  // A publisher's FLV (either ingest's) on the live ladder's stdin, named FLV by `-f`, never
  // probed: onMetaData, audio and video tags, nothing that opens anything else.
  'live-flv': { formats: ['flv', 'live_flv'], lead: ['-f', 'flv'], protocols: ['pipe'] },
  // A live rendition's fragmented MP4 (our own packager's parts) on a restream pusher's stdin.
  'live-fmp4': { formats: ['mov'], lead: ['-f', 'mp4'], protocols: ['pipe'] },
} as const satisfies Record<InputOrigin, InputProfile>;

/** The range proxy (storage/range-proxy.ts) on loopback: the only URL ffmpeg is ever given. */
const RANGE_PROXY = /^http:\/\/127\.0\.0\.1:\d+\//;

/**
 * The arguments that open one input: its allowlists, then `-i`. They hold for the next `-i`
 * only, so each input of a command line takes its own. A path is given after `file:` (a name
 * with a colon is never taken for a protocol; a relative one is from the command's cwd); a range proxy URL may use
 * HTTP over TCP and nothing else (the proxy never answers a redirect).
 */
export function inputArgs(source: string, origin: InputOrigin = 'user'): string[] {
  const profile: InputProfile = PROFILES[origin];
  if (profile.protocols)
    return [
      ...profile.lead,
      ...['-format_whitelist', profile.formats.join(',')],
      ...['-protocol_whitelist', profile.protocols.join(',')],
      ...['-i', source],
    ];
  const proxied = RANGE_PROXY.test(source);
  return [
    ...profile.lead,
    ...['-format_whitelist', profile.formats.join(',')],
    ...['-protocol_whitelist', proxied ? 'http,tcp' : 'file'],
    ...['-i', proxied ? source : `file:${source}`],
  ];
}

const GUARDS = ['-format_whitelist', '-protocol_whitelist'];

/**
 * Throws when a command line opens an input without both allowlists since the previous one,
 * or opens none: a bug of ours, caught where every ffmpeg and ffprobe starts (run.ts).
 */
export function assertGuardedInputs(args: readonly string[]): void {
  let from = 0;
  let inputs = 0;
  for (const [i, a] of args.entries()) {
    if (a !== '-i') continue;
    const before = args.slice(from, i);
    if (!GUARDS.every((g) => before.includes(g)))
      throw new InternalError(`an ffmpeg input without its allowlists (${args[i + 1] ?? ''}): use inputArgs()`);
    from = i + 1;
    inputs++;
  }
  if (inputs === 0) throw new InternalError('an ffmpeg command line with no -i input: use inputArgs()');
}

/** What a refused demuxer was made for, in a user's words. */
const REFUSED: Record<string, string> = {
  hls: 'an HLS playlist (.m3u8)',
  dash: 'a DASH manifest (.mpd)',
  webm_dash_manifest: 'a DASH manifest',
  concat: 'an ffmpeg concat list',
  imf: 'an IMF package',
  sdp: 'an SDP session description',
};

/** Lists ffmpeg would not even recognise as such (a DASH manifest without a profile), by their first bytes. */
const LIST_HEADS: [RegExp, string][] = [
  [/^\s*#EXTM3U/, 'hls'],
  [/^\s*(<\?xml[^>]*>\s*)?<MPD[\s>]/, 'dash'],
  [/^\s*ffconcat /, 'concat'],
];

/**
 * The user's words for an input ffmpeg recognised but the lists refused ("Format not on
 * whitelist", logged under the demuxer's name) or that starts like a playlist (`head`, the
 * file's first bytes); undefined when neither says anything of it.
 */
export function refusedInput(stderr: string, head = ''): UnsupportedMediaError | undefined {
  const text = head.replace(/^\uFEFF/, '');
  const name =
    /\[([\w,]+) @ 0x[0-9a-f]+\] Format not on whitelist/.exec(stderr)?.[1] ??
    LIST_HEADS.find(([re]) => re.test(text))?.[1];
  if (name === undefined) return undefined;
  const what = REFUSED[name];
  if (what)
    return new UnsupportedMediaError(
      `the input is ${what}: playlists and lists of other files are not accepted; give the video file itself`,
    );
  if (/image2|_pipe$|^(png|jpeg|webp|bmp|tiff)/.test(name))
    return new UnsupportedMediaError('the input is a still image or an image sequence: give a video file');
  return new UnsupportedMediaError(`the input's format (${name}) is not accepted: give a video or audio file`);
}

/** A file's first `bytes` bytes (fewer for a shorter file), or none when it cannot be read. */
export async function readHead(file: string, bytes: number): Promise<Uint8Array> {
  const fh = await open(file, 'r').catch(() => undefined);
  if (!fh) return new Uint8Array();
  try {
    const buf = Buffer.alloc(bytes);
    const { bytesRead } = await fh.read(buf, 0, bytes, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/** The first bytes of a local input as text (for refusedInput); empty for a range proxy URL or an unreadable file. */
export async function headText(source: string): Promise<string> {
  if (RANGE_PROXY.test(source)) return '';
  return Buffer.from(await readHead(source, 1024)).toString('utf8');
}
