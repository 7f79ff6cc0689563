import { type SessionRow, type StreamRow, sessionFromRow, streamFromRow } from '../../live/index.ts';
import type { PublicBase } from '../public-base.ts';
import type { AssetOutput } from '../../assets/index.ts';
import { type SessionRecording, toWireSession } from './session.ts';
import { toWireStream } from './stream.ts';

// The payload of a recording.* webhook (spec/API.md section D): the stream and the session as
// the routes show them. The outbox keeps them as rows (migration 502's live_event: the stream
// without its key); recording.ready also keeps the recording asset's output (migration 504's
// trigger, in the transaction that made the asset ready), whence the session's recordingUrl
// and mp4Url.

interface RecordingEventTask {
  stream: StreamRow;
  session?: SessionRow;
  recording?: { output?: Pick<AssetOutput, 'hls' | 'source'> | null };
}

/** Whether an outbox event is a recording's (recording.started, .waiting, .ready). */
export const isRecordingEvent = (e: { event: string }): boolean => e.event.startsWith('recording.');

export function recordingEventPayload(e: { event: string; task: unknown }, base: PublicBase): Record<string, unknown> {
  const task = e.task as RecordingEventTask;
  const stream = toWireStream(streamFromRow(task.stream));
  if (task.session === undefined) return { stream };
  // Before recording.ready the asset is not made yet (or not ready): the session reads `waiting`.
  const recording: SessionRecording =
    e.event === 'recording.ready' ? { phase: 'ready', output: task.recording?.output ?? null } : undefined;
  return { stream, session: toWireSession(sessionFromRow(task.session), recording, base) };
}
