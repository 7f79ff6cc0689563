// Live streams (spec/API.md section D): streams in over RTMP and SRT, a low-latency HLS ladder out.
export { STREAM_EVENT_NAMES, type StreamEventName } from './event-names.ts';
export {
  DEFAULT_LIVE_PROFILES,
  H264_PROFILES,
  type H264Profile,
  PROFILE_BOUNDS,
  type Profile,
  profileProblems,
  rungsFor,
  SOURCE_RENDITION,
} from './profiles.ts';
export { type CreateStream, type StreamPatch, type StreamRow, StreamStore, streamFromRow } from './store.ts';
export type {
  LiveCounters,
  LiveLadder,
  LivePlayback,
  MultistreamTarget,
  RecordingQueue,
  ServedRendition,
  SessionKey,
  SessionRecord,
  StreamRecord,
} from './types.ts';
export type {
  RenditionTap,
  SessionPlugin,
  SessionPluginFactory,
  SessionView,
  TappedPart,
} from './session-plugins.ts';
export type {
  FlvSink,
  IngestListener,
  IngestProtocol,
  PublishAttempt,
  PublishDecision,
  PublishGate,
  PublishRefusal,
  SourceInfo,
} from './ingest-types.ts';
export { LiveNode, type LiveNodeConfig, type LiveNodeOptions, type LiveNodeRegistry } from './node.ts';
export { HEARTBEAT_MS, LEASE_MS, NodeRegistry } from './node-registry.ts';
export { LiveSessionStore, type SessionClaim } from './session-store.ts';
export { type SessionRow, sessionFromRow } from './session-rows.ts';
export { SessionSweep } from './session-sweep.ts';
export { archivePlugin, archiveRetentionJob, LiveArchive } from './archive/index.ts';
export {
  type MultistreamTargetRecord,
  MultistreamTargetStore,
  multistreamPlugin,
  type MultistreamPluginDeps,
  targetUrlProblem,
} from './multistream/index.ts';
export { LiveAdmission, ladderCores } from './admission.ts';
export { planLiveLadder, type LadderPlan } from './ladder.ts';
export {
  type HolderLookup,
  INTERNAL_LIVE_PREFIX,
  LiveHolders,
  type RemoteCut,
  type RemoteLadders,
  RemotePlayback,
  type RemotePlaybackOptions,
} from './cluster/index.ts';
