import type { JobContext } from '../tasks/types.ts';
import type { TranscodeFileOutput, TranscodeParams } from './params.ts';

/**
 * Stand-in for the pipeline until it lands (issue 3): reports progress over a few seconds
 * and completes with an empty output. It honours cancel like the real one must.
 */
export async function placeholderHandler(_params: TranscodeParams, ctx: JobContext): Promise<TranscodeFileOutput> {
  for (let i = 1; i <= 10; i++) {
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, 200);
      ctx.signal.addEventListener('abort', () => (clearTimeout(t), reject(ctx.signal.reason)), { once: true });
    });
    ctx.progress(i / 10);
  }
  return { input_video: { duration: 0, size: 0 } };
}
