export type {
  OutputFolder,
  OutputFolders,
  ProfileSpec,
  RenditionOutput,
  TranscodeFileOutput,
  TranscodeJob,
} from './types.ts';
export { loadC2paSigner, type C2paSigner } from './c2pa.ts';
export { createTranscodeHandler, type TranscodeHandlerDeps } from './handler.ts';
export { runPipeline, type PipelineJob, type PipelineSettings } from './pipeline.ts';
export { probe, requireVideo, type MediaInfo, type ProbeResult } from './probe.ts';
export { planLadder, type Rendition } from './ladder.ts';
export { buildFfmpegArgs } from './command.ts';
