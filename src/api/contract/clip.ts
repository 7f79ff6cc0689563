import { Type, type Static } from '@sinclair/typebox';

// The wire contract of POST /api/clip (spec/API.md sections C and D): the body the `livepeer`
// SDK's `stream.createClip` sends (its components/clippayload.ts: playbackId, startTime,
// endTime?, name, sessionId). The playbackId names one of the caller's assets or live streams.
// For an asset the times are milliseconds from its start; for a live stream they are Unix
// milliseconds, as on Livepeer, within the last MEDIAPLANE_LIVE_CLIP_SECS (what the live
// archive keeps). The answer is `{asset, task}` (operations/createclip.ts: the SDK reads the
// task's id).

export const ClipBody = Type.Object(
  {
    playbackId: Type.String({
      minLength: 1,
      maxLength: 64,
      description: 'The playbackId of the asset (one of yours, ready) or of the live stream (one of yours) to clip.',
    }),
    startTime: Type.Number({
      minimum: 0,
      description:
        "Where the clip starts: milliseconds from the asset's start, or for a live stream Unix milliseconds. Its first frame is the one showing then.",
    }),
    endTime: Type.Optional(
      Type.Number({
        minimum: 0,
        description:
          "Where the clip ends (the frame starting then is left out), counted as startTime is: after it, within the asset. Absent: the asset's end, or for a live stream now.",
      }),
    ),
    name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 512,
        description: 'A title for the new asset ("<source name> (clip)" if absent).',
      }),
    ),
    sessionId: Type.Optional(
      Type.String({
        maxLength: 128,
        description:
          "For a live stream: the session to clip, one of the stream's (its current or last one when absent). An asset has none: it is only kept on the task.",
      }),
    ),
  },
  { additionalProperties: false },
);
export type ClipBody = Static<typeof ClipBody>;

/** A clip's range, its end given or taken from its source. */
export interface ClipRange {
  startTime: number;
  endTime: number;
}

/** The problems of a clip's range against its source (`duration` seconds, `fps` frames a second): 422 messages naming the field. */
export function clipRangeProblems(b: ClipRange, source: { duration: number; fps?: number }): string[] {
  const length = Math.round(source.duration * 1000);
  const problems: string[] = [];
  // A millisecond of slack: the duration is rounded by whoever wrote the container.
  if (b.startTime >= length) problems.push(`startTime: must be within the asset, which is ${length} ms long`);
  if (b.endTime > length + 1) problems.push(`endTime: must be within the asset, which is ${length} ms long`);
  if (b.endTime <= b.startTime) problems.push('endTime: must be greater than startTime');
  else if (source.fps && b.endTime - b.startTime < 1000 / source.fps)
    problems.push(
      `endTime: the clip must hold at least one frame (${(1000 / source.fps).toFixed(1)} ms at ${source.fps} fps)`,
    );
  return problems;
}

/**
 * The problems of a live clip's range (Unix ms) at `nowMs`: within the last `clipSecs` (what the
 * live archive keeps), its end no further ahead than a live clip waits for (`waitMs`), at most
 * `clipSecs` long. 422 messages naming the field and the rule.
 */
export function liveClipRangeProblems(b: ClipRange, o: { nowMs: number; clipSecs: number; waitMs: number }): string[] {
  const problems: string[] = [];
  const kept = o.clipSecs * 1000;
  if (b.startTime < o.nowMs - kept)
    problems.push(
      `startTime: must be within the last ${o.clipSecs} s (Unix milliseconds): the stream is kept that long`,
    );
  if (b.endTime > o.nowMs + o.waitMs)
    problems.push(`endTime: must be at most ${o.waitMs / 1000} s from now (Unix milliseconds)`);
  if (b.endTime <= b.startTime) problems.push('endTime: must be greater than startTime');
  else if (b.endTime - b.startTime > kept) problems.push(`endTime: a live clip is at most ${o.clipSecs} s long`);
  return problems;
}
