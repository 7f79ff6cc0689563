import { CLIP_TASK_TYPE, type LiveClipRange } from '../../assets/index.ts';
import type { TaskWireShape } from './task.ts';
import { uploadTaskWire } from './upload-task.ts';

// How a `clip` Task shows itself (spec/API.md sections C and D): Livepeer's Task, whose
// `params.clip` is {url?, clipStrategy: {startTime, endTime, playbackId}, catalystPipelineStrategy?,
// sessionId?, inputId?} (the SDK's components/task.ts Clip). `inputAssetId` is the asset cut
// from (a live stream's clip has none: it names the stream's playbackId and session), `outputAssetId` the new one. The output is what the new asset got, as an upload's is
// (the SDK's Task has no `output.clip` and drops it; plain HTTP sees it).

export { CLIP_TASK_TYPE };

/** The params the clip route (api/clip-routes.ts) gives a clip task; the asset store adds assetId and playbackId. */
export interface ClipTaskParams {
  assetId?: string;
  playbackId?: string;
  /** The asset cut from, and its source's store key (not shown). */
  source?: { assetId?: string; playbackId?: string; key?: string };
  startTime?: number;
  endTime?: number;
  sessionId?: string;
  /** A clip of a live stream: its session, the stream's playbackId, the range in Unix ms (assets' LiveClipRange). */
  live?: Partial<LiveClipRange>;
}

export const clipTaskWire: TaskWireShape = {
  params: (stored) => {
    const p = stored as ClipTaskParams;
    const { live } = p;
    const clip: Record<string, unknown> = {
      clipStrategy: live
        ? { startTime: live.startTime, endTime: live.endTime, playbackId: live.playbackId }
        : { assetId: p.source?.assetId, startTime: p.startTime, endTime: p.endTime, playbackId: p.source?.playbackId },
    };
    if (p.source?.assetId !== undefined) clip.inputId = p.source.assetId;
    const sessionId = live?.sessionId ?? p.sessionId;
    if (sessionId !== undefined) clip.sessionId = sessionId;
    return { clip };
  },
  output: (stored, task, base) => ({ clip: uploadTaskWire.output(stored, task, base).upload }),
  assets: (stored) => {
    const p = stored as ClipTaskParams;
    return {
      ...(typeof p.source?.assetId === 'string' ? { inputAssetId: p.source.assetId } : {}),
      ...(typeof p.assetId === 'string' ? { outputAssetId: p.assetId } : {}),
    };
  },
};
