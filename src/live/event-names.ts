// The webhook events of live streams (spec/API.md section D), names only: this file imports
// nothing, so the console can bundle it for its webhook form as it does the task and asset names.

/**
 * Written into the outbox of task events (task_events) by the streams migrations' SQL, in the
 * same statement as the state change: `task_id` holds the stream's id. For `stream.*` the
 * outbox's `task` is the stream row (payload `{stream}`); for `recording.*` and
 * `multistream.*` it is `{stream, session?, target?}` (payload the same, as the routes show them).
 */
export const STREAM_EVENT_NAMES = [
  'stream.started',
  'stream.idle',
  'recording.started',
  'recording.waiting',
  'recording.ready',
  'multistream.connected',
  'multistream.error',
  'multistream.disconnected',
] as const;
export type StreamEventName = (typeof STREAM_EVENT_NAMES)[number];
