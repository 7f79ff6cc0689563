import { taskOfEvent, type TaskEventRow } from '../../tasks/index.ts';
import type { PublicBase } from '../public-base.ts';
import { assetOfEvent, isAssetEvent, toWireAsset } from './asset.ts';
import { toWireTask } from './index.ts';
import { isMultistreamEvent, multistreamEventPayload } from './multistream.ts';
import { isRecordingEvent, recordingEventPayload } from './recording-event.ts';
import { isStreamEvent, streamOfEvent, toWireStream } from './stream.ts';

/**
 * The `payload` of a webhook delivery (spec/API.md): `{asset}` for an asset event, as GET
 * /api/asset/{id} shows it, `{stream}` for a stream event as GET /api/stream/{id} does (less
 * its key: the outbox never holds it), `{stream, target}` for a restream target's (multistream.*:
 * the target without its url), `{stream, session}` for a recording's (recording.*), else `{task}` as GET /api/task/{id} does. An asset's
 * or a stream's event keeps its row where a task event keeps the task (migrations 010, 500).
 */
export function webhookPayload(e: Pick<TaskEventRow, 'event' | 'task'>, base: PublicBase): Record<string, unknown> {
  if (isAssetEvent(e)) return { asset: toWireAsset(assetOfEvent(e), base) };
  if (isMultistreamEvent(e)) return multistreamEventPayload(e);
  if (isRecordingEvent(e)) return recordingEventPayload(e, base);
  if (isStreamEvent(e)) return { stream: toWireStream(streamOfEvent(e)) };
  return { task: toWireTask(taskOfEvent(e), base) };
}
