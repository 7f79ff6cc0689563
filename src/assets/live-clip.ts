import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Type, type Static } from '@sinclair/typebox';
import type { Logger } from 'pino';
import { InputUnreadableError, InternalError, UnsupportedMediaError } from '../lib/errors.ts';
import { inputArgs, runProcess } from '../transcode/index.ts';
import type { RecordingArchive } from './types.ts';

// A clip of a live stream (spec/API.md section D): `startTime`/`endTime` are Unix milliseconds,
// as Livepeer's `POST /clip` takes them for a live playbackId. The range is read from the
// session's archive (the live domain keeps the source there as it arrives, RecordingArchive),
// which may lag the wall clock by a part or two: the clip waits for it, bounded.

/** How long a live clip waits for the archive to hold its range's end before clipping what is there. */
export const LIVE_CLIP_WAIT_MS = 15_000;
/** How often the archive's end is read while waiting. */
const POLL_MS = 250;

/** What a `clip` task of a live stream keeps: the session, the range (Unix ms), and the stream's playbackId. */
export const LiveClipRange = Type.Object({
  sessionId: Type.String({ minLength: 1, maxLength: 128 }),
  /** The stream's playbackId (its task's `clipStrategy.playbackId`). */
  playbackId: Type.String({ minLength: 1, maxLength: 64 }),
  startTime: Type.Number({ minimum: 0 }),
  endTime: Type.Number({ minimum: 0 }),
});
export type LiveClipRange = Static<typeof LiveClipRange>;

export interface LiveRangeDeps {
  ffprobePath: string;
  archive?: RecordingArchive | undefined;
  /** LIVE_CLIP_WAIT_MS unless a test says otherwise. */
  waitMs?: number | undefined;
}

/** The archived range as a local file, and the range's seconds from that file's first frame. */
export interface LiveRangeFile {
  input: string;
  range: { start: number; end: number };
}

/**
 * The session's archive over [startTime, endTime] as one MP4 in the scratch folder (from the
 * keyframe at or before startTime), and where the range falls in it: the file starts at
 * `startWallMs`, so a wall-clock time t is (t - startWallMs) / 1000 seconds into it. A range
 * that reaches past what was archived once the wait is over (the publisher stopped) is cut at
 * the archive's end; a range with nothing archived in it fails, naming the range.
 */
export async function readLiveRange(
  d: LiveRangeDeps,
  live: LiveClipRange,
  ctx: { scratchDir: string; signal: AbortSignal; log?: Logger | undefined },
): Promise<LiveRangeFile> {
  // A worker built without the live archive (main.ts passes it): a fault of the deployment.
  if (!d.archive) throw new InternalError('this worker cannot read live streams (it has no live archive)');
  const until = await archivedThrough(d.archive, live, { signal: ctx.signal, waitMs: d.waitMs ?? LIVE_CLIP_WAIT_MS });
  const endTime = Math.min(live.endTime, until ?? live.endTime);
  if (until === undefined || endTime <= live.startTime) throw nothingArchived(live);
  if (endTime < live.endTime)
    ctx.log?.warn(
      { session: live.sessionId, asked: live.endTime, archived: until },
      'live clip cut at the archive end',
    );
  const input = path.join(ctx.scratchDir, 'live-source.mp4');
  const got = await d.archive.extract({
    sessionId: live.sessionId,
    // The archive's index holds whole milliseconds.
    fromMs: Math.floor(live.startTime),
    toMs: Math.ceil(endTime),
    dest: input,
    signal: ctx.signal,
  });
  if (!got) throw nothingArchived(live);
  // The cut counts from the file's clock start, which may lie before its first frame (audio
  // primed earlier, or a B-frame delay that a fragmented MP4 has no edit list to hide).
  const lead = await firstFrameLead(d.ffprobePath, input, ctx.signal);
  const start = fileSecs(got, live.startTime);
  const end = Math.min(got.durationSecs, fileSecs(got, endTime));
  if (end <= start) throw nothingArchived(live);
  // The session began after startTime, or its beginning is no longer kept: the clip starts later.
  if (got.startWallMs > live.startTime)
    ctx.log?.warn(
      { session: live.sessionId, asked: live.startTime, archived: got.startWallMs },
      'live clip starts later',
    );
  return { input, range: { start: lead + start, end: lead + end } };
}

type Extracted = NonNullable<Awaited<ReturnType<RecordingArchive['extract']>>>;

/**
 * Where wall-clock `t` (ms) falls in the extracted file, in seconds: in the run it was sent in
 * (runs are joined end to end, so a reconnect's gap is not in the file: a time in it falls at
 * the next run's start); 0 before the file's start.
 */
function fileSecs(got: Extracted, t: number): number {
  const runs = got.runs ?? [{ wallStartMs: got.startWallMs, startSecs: 0 }];
  const at = Math.max(
    0,
    runs.findLastIndex((r) => r.wallStartMs <= t),
  );
  const run = runs[at];
  if (!run) return 0;
  const secs = run.startSecs + Math.max(0, (t - run.wallStartMs) / 1000);
  const next = runs[at + 1];
  return next ? Math.min(secs, next.startSecs) : secs;
}

/** Seconds from the file's clock start (ffmpeg's -ss 0) to its first video frame; 0 without video. */
async function firstFrameLead(ffprobePath: string, file: string, signal: AbortSignal): Promise<number> {
  const res = await runProcess(
    ffprobePath,
    [
      ...['-v', 'error', '-select_streams', 'v:0', '-read_intervals', '%+#1'],
      ...['-show_entries', 'format=start_time:packet=pts_time', '-of', 'json'],
      ...inputArgs(file, 'user'),
    ],
    { signal, timeoutMs: 60_000, collectStdout: true },
  );
  if (res.code !== 0) throw new UnsupportedMediaError("the live stream's archive could not be read");
  const json = JSON.parse(res.stdout) as { format?: { start_time?: string }; packets?: { pts_time?: string }[] };
  const lead = Number(json.packets?.[0]?.pts_time) - Number(json.format?.start_time);
  return Number.isFinite(lead) && lead > 0 ? lead : 0;
}

/** The archive's end once it reaches `endTime`, or where it stands when the wait is over. */
async function archivedThrough(
  archive: RecordingArchive,
  live: LiveClipRange,
  o: { signal: AbortSignal; waitMs: number },
): Promise<number | undefined> {
  const deadline = Date.now() + o.waitMs;
  for (;;) {
    const until = await archive.archivedUntil(live.sessionId);
    if ((until !== undefined && until >= live.endTime) || Date.now() >= deadline) return until;
    await sleep(Math.min(POLL_MS, Math.max(1, deadline - Date.now())), undefined, { signal: o.signal });
  }
}

function nothingArchived(live: LiveClipRange): InputUnreadableError {
  const iso = (ms: number) => new Date(ms).toISOString();
  return new InputUnreadableError(
    `nothing of the stream is kept from ${iso(live.startTime)} to ${iso(live.endTime)}: it was not live then, or that part is no longer kept`,
  );
}
