import path from 'node:path';
import { InternalError } from '../../lib/errors.ts';
import type { JobContext } from '../../tasks/index.ts';
import { buildFfmpegArgs } from '../command.ts';
import { detail } from '../decode-check.ts';
import { AAC_ARGS } from '../encoders.ts';
import { inputArgs } from '../media-input.ts';
import { AAC_FRAME_SAMPLES, AUDIO_RATE, kindsOf, type AudioWindow, type CommandPlan } from '../outputs/index.ts';
import { FFMPEG_QUIET, runProcess } from '../run.ts';
import { keepFrames } from './audio-adts.ts';
import { encodePiece } from './encode.ts';
import type { AudioJob, ChunkedDeps } from './types.ts';

// An audio piece, sample-exact: every track of its window is encoded with the single run's
// AAC targets from `prerollFrames` before its first kept sample to a couple of frames past its
// last, then only the packets that decode to its window are kept (ffmpeg's AAC encoder primes
// 1024 samples: packet k of an encode decodes to its input's samples [(k-1)*1024, k*1024)),
// so the pieces' packets in order are the single encode's packet sequence, the first piece
// keeping the priming packet as that encode has it. The kept packets are then copied into
// every format's audio targets by the single run's command (command.ts audioPiece), numbered
// and timed in the whole.

/** Frames encoded past the piece's last kept one: that packet is then a settled one, not the encoder's flush. */
const POSTROLL_FRAMES = 2;

/** The pre-encode's share of the piece's progress; the trim and the copy are quick. */
const PRE_ENCODE_SHARE = 0.95;

/**
 * Each piece's samples on the input's clock: a track that starts late (or has a gap) is
 * filled with silence from 0, as a piece that seeks into it finds its samples at their time;
 * otherwise the first piece (which reads from the track's first sample) and the others
 * would disagree by the offset.
 */
const ON_THE_INPUT_CLOCK = 'aresample=async=1:first_pts=0';

const secs = (samples: number): string => (samples / AUDIO_RATE).toFixed(6);

/**
 * The filter of each track: on the input's clock, and padded with silence to the samples the
 * piece keeps, so that a track ending early (before the video) still gives every piece its
 * packets. The last piece keeps what its encode gives, so it is padded only to a few frames:
 * a track that covers it ends where the single run's does, one that ended before it ends
 * those frames into it.
 */
function trackFilter(length: number | undefined, prerollFrames: number): string {
  const least = length ?? (prerollFrames + 1 + POSTROLL_FRAMES) * AAC_FRAME_SAMPLES;
  return `${ON_THE_INPUT_CLOCK},apad=whole_dur=${secs(least)}`;
}

/** Which packets of the piece's own encode it keeps: from `first`, `count` of them (undefined: to the end). */
export function keptPackets(w: AudioWindow): { first: number; count: number | undefined } {
  const frames = w.keepSamples === undefined ? undefined : w.keepSamples / AAC_FRAME_SAMPLES;
  // The first piece starts the whole: its priming packet stays, as the single encode's.
  if (w.startSample === 0) return { first: 0, count: frames === undefined ? undefined : frames + 1 };
  return { first: w.prerollFrames + 1, count: frames };
}

/**
 * The piece's encode, trim and copy into `<scratch>/out` with the single run's layout there
 * (the HLS trees' audio playlists, the `.m4a`): its output folder.
 */
export async function encodeAudioPiece(
  deps: ChunkedDeps,
  o: { ctx: JobContext; job: AudioJob; plan: Omit<CommandPlan, 'input'>; share: number },
): Promise<string> {
  const { ctx, job } = o;
  const { window, index } = job.audio;
  const tracks = job.media.audioTracks;
  const from = window.startSample - window.prerollFrames * AAC_FRAME_SAMPLES;
  const length =
    window.keepSamples === undefined
      ? undefined
      : window.prerollFrames * AAC_FRAME_SAMPLES + window.keepSamples + POSTROLL_FRAMES * AAC_FRAME_SAMPLES;
  const seconds = (length ?? Math.max(0, job.duration * AUDIO_RATE - from)) / AUDIO_RATE;
  const filter = trackFilter(length, window.prerollFrames);
  const encoded = (k: number): string => `encoded-${k}.aac`;
  const kept = (k: number): string => `kept-${k}.aac`;
  const outDir = await encodePiece(deps, {
    ctx,
    job,
    plan: o.plan,
    seconds,
    share: o.share * PRE_ENCODE_SHARE,
    args: (input) => [
      ...FFMPEG_QUIET,
      ...['-progress', 'pipe:1', '-stats_period', '1'],
      ...(from > 0 ? ['-ss', secs(from)] : []),
      ...(length === undefined ? [] : ['-t', secs(length)]),
      ...inputArgs(input),
      ...tracks.flatMap((t, k) => [
        '-map',
        `0:a:${t.index}`,
        '-map_metadata',
        '-1',
        ...['-filter:a', filter],
        ...AAC_ARGS,
        '-f',
        'adts',
        encoded(k),
      ]),
    ],
  });
  const keep = keptPackets(window);
  for (const k of tracks.keys()) await keepFrames(path.join(outDir, encoded(k)), path.join(outDir, kept(k)), keep);
  const plan: CommandPlan = {
    ...o.plan,
    input: '',
    kinds: kindsOf(job.outputs),
    audioPiece: {
      files: tracks.map((_, k) => kept(k)),
      primed: keep.first === 0,
      // Its first packet decodes to its first sample; a packet's decode time is a frame ahead of that (the priming).
      startSecs: index === 0 ? 0 : (window.startSample + AAC_FRAME_SAMPLES) / AUDIO_RATE,
      firstSegment: window.firstSegment,
    },
  };
  const res = await runProcess(deps.config.ffmpegPath, buildFfmpegArgs(plan), {
    signal: ctx.signal,
    cwd: outDir,
    timeoutMs: deps.config.transcodeTimeoutMs,
  });
  if (res.code !== 0) throw new InternalError(`copying an audio piece's packets failed${detail(res.stderrTail)}`);
  return outDir;
}
