export type { TranscodeFileOutput, TranscodeJob } from './types.ts';
export type { ProfileSpec, RenditionOutput } from './renditions.ts';
export { OUTPUT_KINDS, type OutputFolder, type OutputFolders, type OutputKind } from './outputs/index.ts';
export { profileProblems, signingProblem, writtenBy, type ProfileProblem } from './profile-rules.ts';
export { loadC2paSigner, type C2paSigner } from './c2pa.ts';
export { builtinOutputPrefix, createTranscodeHandler, StoredProfile, type TranscodeHandlerDeps } from './handler.ts';
export { runPipeline, type PipelineJob, type PipelineSettings } from './pipeline.ts';
export {
  c2paProblems,
  forwardOnly,
  progressWithin,
  runJob,
  type FinishSpec,
  type JobInput,
  type JobSpec,
  type ReadInput,
} from './job.ts';
export type { FinishStep, FinishSteps, JobFinish } from './finish.ts';
export type { OutputPlace } from './destination.ts';
export { probe, requireVideo, type MediaInfo, type ProbeResult } from './probe.ts';
export { planLadder, type Rendition } from './ladder.ts';
export { buildFfmpegArgs } from './command.ts';
export { FFMPEG_QUIET, runProcess, setVodNiceness, type RunOptions, type RunResult } from './run.ts';
export { inputArgs, refusedInput, type InputOrigin } from './media-input.ts';
export { ProgressParser } from './progress.ts';
export { createChunkedHandlers, PIECE_TYPES, piecesPrefix, removeEndedPieces } from './chunked/index.ts';
