// Restreaming (spec/API.md section D): saved targets, and a session plug-in that pushes a
// rendition to each target the stream names, copied, over RTMP(S) or SRT.
export { multistreamPlugin, type MultistreamPluginDeps } from './plugin.ts';
export { type PusherEvent, type PusherState, TargetPusher, type TargetPusherOptions } from './pusher.ts';
export { guardedTargetUrl, targetUrlProblem, TARGET_PROTOCOLS } from './target-address.ts';
export {
  type CreateMultistreamTarget,
  type MultistreamTargetPatch,
  type MultistreamTargetRecord,
  MultistreamTargetStore,
  type TargetShown,
} from './target-store.ts';
