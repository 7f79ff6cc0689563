import { Type, type TSchema } from '@sinclair/typebox';
import { checkedHandler, type JobContext, type JobHandler } from '../../tasks/index.ts';
import { runAudioPiece, runChunkPiece } from './pieces.ts';
import { runStitch } from './stitch.ts';
import { PIECE_TYPES, type AudioJob, type ChunkedDeps, type ChunkJob, type StitchJob } from './types.ts';

// The piece task types and their handlers, for the worker's registry (main.ts).
// Their params are written by the split step (split.ts), never by a caller: the schemas
// check the shape a handler relies on, so a row from another version fails at once with the
// field named instead of deep inside an encode.

const PieceFields = {
  // One of the two (types.ts SourceRef): the split step writes exactly one.
  input: Type.Optional(Type.Object({})),
  stored: Type.Optional(Type.String()),
  storage: Type.Optional(Type.Object({ type: Type.String() })),
  builtinPrefix: Type.Optional(Type.String({ minLength: 1 })),
  finish: Type.Optional(Type.Object({ kind: Type.String(), params: Type.Object({}) })),
  outputs: Type.Object({}),
  media: Type.Object({ duration: Type.Number(), audioTracks: Type.Array(Type.Object({ index: Type.Integer() })) }),
  renditions: Type.Array(Type.Object({ name: Type.String(), width: Type.Integer(), height: Type.Integer() }), {
    minItems: 1,
  }),
  segmentSecs: Type.Number({ exclusiveMinimum: 0 }),
  duration: Type.Number({ exclusiveMinimum: 0 }),
  c2pa: Type.Optional(Type.Boolean()),
};
const StoredAudio = Type.Object({
  ...PieceFields,
  audio: Type.Object({
    index: Type.Integer({ minimum: 0 }),
    count: Type.Integer({ minimum: 1 }),
    window: Type.Object({
      startSample: Type.Integer({ minimum: 0 }),
      keepSamples: Type.Optional(Type.Integer({ exclusiveMinimum: 0 })),
      prerollFrames: Type.Integer({ minimum: 0 }),
      firstSegment: Type.Integer({ minimum: 0 }),
    }),
  }),
});
const StoredChunk = Type.Object({
  ...PieceFields,
  chunk: Type.Object({
    index: Type.Integer({ minimum: 0 }),
    count: Type.Integer({ minimum: 1 }),
    window: Type.Object({
      seekSecs: Type.Number({ minimum: 0 }),
      skipSecs: Type.Number({ minimum: 0 }),
      keepSecs: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
      startSecs: Type.Number({ minimum: 0 }),
      firstSegment: Type.Integer({ minimum: 0 }),
    }),
  }),
});
const StoredStitch = Type.Object({
  ...PieceFields,
  chunks: Type.Integer({ minimum: 1 }),
  chunkSecs: Type.Number(),
  inputSize: Type.Number(),
  audioPieces: Type.Integer({ minimum: 0 }),
});

/** The schema checked the fields named above; the rest is the split step's own JSON. */
function piece<T, O>(schema: TSchema, run: (params: T, ctx: JobContext) => Promise<O>): JobHandler<unknown, O> {
  return checkedHandler(schema, (params, ctx) => run(params as T, ctx));
}

export function createChunkedHandlers(deps: ChunkedDeps): Record<string, JobHandler<unknown, unknown>> {
  return {
    [PIECE_TYPES.audio]: piece<AudioJob, unknown>(StoredAudio, (p, ctx) => runAudioPiece(deps, p, ctx)),
    [PIECE_TYPES.chunk]: piece<ChunkJob, unknown>(StoredChunk, (p, ctx) => runChunkPiece(deps, p, ctx)),
    [PIECE_TYPES.stitch]: piece<StitchJob, unknown>(StoredStitch, (p, ctx) => runStitch(deps, p, ctx)),
  };
}
