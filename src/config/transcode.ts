import { defineSettings } from './types.ts';

// Settings of the transcode domain (see types.ts for the shape of an entry).
export const transcodeSettings = defineSettings({
  ffmpegPath: {
    env: 'MEDIAPLANE_FFMPEG_PATH',
    type: 'string',
    group: 'transcode',
    default: 'ffmpeg',
    description: 'The ffmpeg binary the pipeline runs (a name on PATH or a full path).',
  },
  ffprobePath: {
    env: 'MEDIAPLANE_FFPROBE_PATH',
    type: 'string',
    group: 'transcode',
    default: 'ffprobe',
    description: 'The ffprobe binary used to inspect inputs.',
  },
  x264Preset: {
    env: 'MEDIAPLANE_X264_PRESET',
    type: 'enum',
    group: 'transcode',
    default: 'veryfast',
    values: ['ultrafast', 'superfast', 'veryfast', 'faster', 'fast', 'medium', 'slow', 'slower', 'veryslow'] as const,
    description: 'x264/x265 speed preset: faster presets cost quality per bit.',
  },
  ffmpegThreads: {
    env: 'MEDIAPLANE_FFMPEG_THREADS',
    type: 'int',
    group: 'transcode',
    default: 0,
    min: 0,
    max: 256,
    description: 'Threads per ffmpeg encoder; 0 lets ffmpeg pick from the CPU count.',
  },
  transcodeTimeoutMs: {
    env: 'MEDIAPLANE_TRANSCODE_TIMEOUT_MS',
    type: 'int',
    group: 'transcode',
    default: 4 * 3600_000,
    min: 1000,
    description: 'Longest one ffmpeg run may take before the job fails with a timeout.',
  },
  defaultSegmentSecs: {
    env: 'MEDIAPLANE_DEFAULT_SEGMENT_SECS',
    type: 'number',
    group: 'transcode',
    default: 6,
    min: 1,
    max: 60,
    description:
      'HLS segment duration in seconds, 1 to 60 (the bound of targetSegmentSizeSecs), when a request gives none.',
  },
  chunkThresholdSecs: {
    env: 'MEDIAPLANE_CHUNK_THRESHOLD_SECS',
    type: 'number',
    group: 'transcode',
    default: 120,
    min: 0,
    description: 'A transcode of a longer input is split into chunks that any worker encodes (0: never split).',
  },
  chunkSecs: {
    env: 'MEDIAPLANE_CHUNK_SECS',
    type: 'number',
    group: 'transcode',
    default: 30,
    min: 1,
    max: 3600,
    description: 'Seconds of video per chunk, rounded to a whole number of segments.',
  },
  audioChunkSecs: {
    env: 'MEDIAPLANE_AUDIO_CHUNK_SECS',
    type: 'number',
    group: 'transcode',
    default: 0,
    min: 0,
    max: 3600,
    description:
      'Seconds of audio per audio piece of a split transcode, rounded to a whole number of segments and cut on AAC frames (0: MEDIAPLANE_CHUNK_SECS).',
  },
  maxOutputFps: {
    env: 'MEDIAPLANE_MAX_OUTPUT_FPS',
    type: 'number',
    group: 'transcode',
    default: 60,
    exclusiveMin: 0,
    max: 240,
    description: 'Frame rate ceiling of the default ladder (a 120 fps phone clip comes out at this rate).',
  },
  perTitle: {
    env: 'MEDIAPLANE_PER_TITLE',
    type: 'bool',
    group: 'transcode',
    default: true,
    description:
      'Per-title ladder: analyse each video and encode the default ladder (and profiles that set perTitle) as capped CRF under their fixed bitrates, dropping a rung that saves no bandwidth; false: every rung at its fixed bitrate. A request may say either with perTitle.',
  },
});
