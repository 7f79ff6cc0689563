import type { HlsOutput } from '../renditions.ts';
import { publishHls } from './hls-publish.ts';
import { hlsTreeFormat } from './hls-tree.ts';

/**
 * HLS with MPEG-TS segments (`outputs.hls`), what every HLS player takes. AV1 and VP9 have no
 * TS mapping players take, so its renditions are H.264 or HEVC (issue #19).
 */
export const hls = hlsTreeFormat<'hls', HlsOutput>(
  { key: 'hls', label: 'HLS with TS segments', segments: 'ts', encoders: ['H.264', 'HEVC'], muxesSingleTrack: true },
  async (run, tree) => (await publishHls(run, run.queue, tree)).output,
  async (_run, published) => published.output,
);
