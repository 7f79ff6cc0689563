import { taskOfEvent, type TaskEventRow } from '../../tasks/index.ts';
import type { PublicBase } from '../public-base.ts';
import { assetOfEvent, isAssetEvent, toWireAsset } from './asset.ts';
import { toWireTask } from './index.ts';

/**
 * The `payload` of a webhook delivery (spec/API.md): `{asset}` for an asset event, as GET
 * /api/asset/{id} shows it, else `{task}` as GET /api/task/{id} does. An asset event's outbox
 * row keeps the asset where a task event keeps the task (migration 010).
 */
export function webhookPayload(e: Pick<TaskEventRow, 'event' | 'task'>, base: PublicBase): Record<string, unknown> {
  if (isAssetEvent(e)) return { asset: toWireAsset(assetOfEvent(e), base) };
  return { task: toWireTask(taskOfEvent(e), base) };
}
