// The webhook events of live streams (spec/API.md section D), names only: this file imports
// nothing, so the console can bundle it for its webhook form as it does the task and asset names.

/**
 * Written into the outbox of task events (task_events) by the streams migration's stream_event,
 * in the same statement as the state change: `task_id` holds the stream's id and `task` the
 * payload `{stream}`, the stream as GET /api/stream/{id} shows it.
 */
export const STREAM_EVENT_NAMES = ['stream.started', 'stream.idle'] as const;
export type StreamEventName = (typeof STREAM_EVENT_NAMES)[number];
