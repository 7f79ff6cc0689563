export * from './params.ts';
export { placeholderHandler } from './placeholder.ts';
export { createTranscodeHandler, type TranscodeHandlerDeps } from './handler.ts';
export { runPipeline, type PipelineJob, type PipelineSettings } from './pipeline.ts';
export { probe, type ProbeResult } from './probe.ts';
export { planLadder, type Rendition } from './ladder.ts';
export { buildFfmpegArgs } from './command.ts';
export { runTranscodeCommand, TRANSCODE_HELP } from '../cli/transcode.ts';
