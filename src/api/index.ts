export { buildApp, type ApiDeps } from './app.ts';
export { IdempotencyKeys, purgeExpiredIdempotencyKeys } from './idempotency.ts';
export { checkTranscodeRequest, type TranscodeRules } from './validate-transcode.ts';
export { configuredBase, publicBase, type PublicBase } from './public-base.ts';
export { TRANSCODE_TASK_TYPE, toWireTask, type WireTask } from './contract/index.ts';
export { webhookPayload } from './contract/webhook-payload.ts';
