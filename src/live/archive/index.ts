// The archive of live sessions: each session's source kept in the built-in store as it
// arrives, for recordings and live clips.
export { archivePlugin, type ArchivePluginDeps } from './plugin.ts';
export { LiveArchive, type ExtractOptions, type LiveArchiveOptions } from './live-archive.ts';
export { archiveRetentionJob, type ArchiveRetentionDeps } from './retention.ts';
