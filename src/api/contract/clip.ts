import { Type, type Static } from '@sinclair/typebox';

// The wire contract of POST /api/clip (spec/API.md section C, issue #28): the body the
// `livepeer` SDK's `stream.createClip` sends (its components/clippayload.ts: playbackId,
// startTime, endTime, name, sessionId). On Livepeer the times are Unix milliseconds of a
// stream's recording; here the clipped thing is an asset, so they are milliseconds from its
// start. The answer is `{asset, task}` (operations/createclip.ts: the SDK reads the task's id).

export const ClipBody = Type.Object(
  {
    playbackId: Type.String({
      minLength: 1,
      maxLength: 64,
      description: 'The playbackId of the asset to clip: one of yours, ready.',
    }),
    startTime: Type.Number({
      minimum: 0,
      description:
        "Where the clip starts, in milliseconds from the asset's start: its first frame is the one showing then.",
    }),
    endTime: Type.Number({
      minimum: 0,
      description:
        "Where the clip ends, in milliseconds from the asset's start (the frame starting then is left out): after startTime, within the asset.",
    }),
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
        description: "Livepeer's recording session of a stream; an asset has none, so it is only kept on the task.",
      }),
    ),
  },
  { additionalProperties: false },
);
export type ClipBody = Static<typeof ClipBody>;

/** The problems of a clip's range against its source (`duration` seconds, `fps` frames a second): 422 messages naming the field. */
export function clipRangeProblems(
  b: Pick<ClipBody, 'startTime' | 'endTime'>,
  source: { duration: number; fps?: number },
): string[] {
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
