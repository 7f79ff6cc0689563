import { runProcess } from './run.ts';

interface Stream {
  codec_type?: string;
  codec_name?: string;
  profile?: string;
  level?: number;
}

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
    'stream=codec_type,codec_name,profile,level',
    file,
  ];
  const res = await runProcess(opts.ffprobePath, args, { signal: opts.signal, timeoutMs: 60_000, collectStdout: true });
  let streams: Stream[] = [];
  try {
    streams = (JSON.parse(res.stdout) as { streams?: Stream[] }).streams ?? [];
  } catch {
    // fall through to the defaults below
  }
  const codecs = streams.map(codecString).filter((c): c is string => c !== undefined);
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

export function codecString(s: Stream): string | undefined {
  if (s.codec_name === 'aac') return 'mp4a.40.2';
  if (s.codec_name === 'h264') {
    const level = (s.level && s.level > 0 ? s.level : 40).toString(16).padStart(2, '0');
    const p = s.profile ?? 'High';
    // profile_idc and constraint flags: Constrained Baseline 42E0, Main 4D40, High 6400.
    const head = /Baseline/.test(p) ? '42E0' : /Main/.test(p) ? '4D40' : '6400';
    return `avc1.${head}${level}`.toUpperCase().replace('AVC1', 'avc1');
  }
  if (s.codec_name === 'hevc') {
    const level = s.level && s.level > 0 ? s.level : 120;
    return /10/.test(s.profile ?? '') ? `hvc1.2.4.L${level}.B0` : `hvc1.1.6.L${level}.B0`;
  }
  return undefined;
}
