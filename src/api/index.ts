export { buildApp, type ApiDeps } from './app.ts';
export { checkTranscodeRequest, type TranscodeRules } from './validate-transcode.ts';
