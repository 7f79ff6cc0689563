// Thumbnails (issue #19): a storyboard (JPEG sprite sheets plus a WebVTT file whose cues
// point into them with `#xywh=x,y,w,h`, the convention Video.js, Vidstack and Mux players
// read) and a poster image, both made in the transcode's own ffmpeg run as two more branches
// of its split. The storyboard branch runs at a frame every few seconds, so it costs little
// beside the renditions; the poster branch passes one frame and closes.

/** The storyboard as planned before the run; the VTT is written from the same plan. */
export interface StoryboardPlan {
  /** The duration it covers, milliseconds: the last cue ends here. */
  durationMs: number;
  /** Between two frames, milliseconds (a multiple of 50, so cue times are exact). */
  intervalMs: number;
  /** Frames in the storyboard: exactly this many, whatever the video's real length. */
  count: number;
  tileWidth: number;
  tileHeight: number;
  columns: number;
  /** Rows of one sheet. */
  rows: number;
  sheets: number;
  poster: PosterPlan;
}

export interface PosterPlan {
  /** Where the frame is taken, seconds. */
  atSecs: number;
  width: number;
  height: number;
}

/** A frame every 2 s where that gives at most MAX_FRAMES; longer inputs get a longer interval. */
const BASE_INTERVAL_MS = 2000;
const MAX_FRAMES = 100;
/** Short clips still get about this many frames, at most one every MIN_INTERVAL_MS. */
const MIN_FRAMES = 10;
const MIN_INTERVAL_MS = 250;
const INTERVAL_STEP_MS = 50;
/** Tiles fit this box (16:9: 160x90, 9:16: 90x160); posters fit POSTER_BOX, never upscaled. */
const TILE_BOX = 160;
const POSTER_BOX = 1280;
const MAX_COLUMNS = 10;
const MAX_ROWS = 10;
/** The poster is the frame nearest its time on this grid (frames per second). */
const POSTER_FPS = 10;

/**
 * The storyboard of a video of `durationSecs` at `width`x`height` (as displayed), or
 * undefined when the duration is unknown (0): the frame count has to be fixed before the run.
 */
export function planStoryboard(durationSecs: number, width: number, height: number): StoryboardPlan | undefined {
  const durationMs = Math.round(durationSecs * 1000);
  if (!(durationMs > 0) || !(width > 0) || !(height > 0)) return undefined;
  const wanted = Math.max(
    durationMs / MAX_FRAMES,
    Math.min(BASE_INTERVAL_MS, durationMs / MIN_FRAMES),
    MIN_INTERVAL_MS,
  );
  const intervalMs = Math.ceil(wanted / INTERVAL_STEP_MS - 1e-9) * INTERVAL_STEP_MS;
  const count = Math.max(1, Math.ceil(durationMs / intervalMs));
  const tile = fitEven(width, height, TILE_BOX);
  const columns = Math.min(count, MAX_COLUMNS);
  const rows = Math.min(Math.ceil(count / columns), MAX_ROWS);
  return {
    durationMs,
    intervalMs,
    count,
    tileWidth: tile.width,
    tileHeight: tile.height,
    columns,
    rows,
    sheets: Math.ceil(count / (columns * rows)),
    // The middle, as Mux picks by default: past any fade-in, whatever the clip's length.
    poster: { atSecs: durationMs / 2000, ...fitEven(width, height, Math.min(POSTER_BOX, Math.max(width, height))) },
  };
}

/** The size that fits `box` x `box` with the picture's aspect ratio, both sides even (4:2:0). */
function fitEven(width: number, height: number, box: number): { width: number; height: number } {
  const scale = box / Math.max(width, height);
  const even = (n: number): number => Math.max(2, 2 * Math.round((n * scale) / 2));
  return { width: even(width), height: even(height) };
}

/** The frame rate of one frame per interval, as ffmpeg reads a rational (`20/7`). */
function framesPerSecond(intervalMs: number): string {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  const d = gcd(1000, intervalMs);
  return `${1000 / d}/${intervalMs / d}`;
}

/**
 * The storyboard branch: one frame per interval, each the frame shown at its cue's start,
 * padded with the last frame and cut at exactly `count`, so the sheets hold as many tiles
 * as the VTT has cues even where the video ends early or runs late (on its own, fps emits
 * ceil(duration / interval) frames: tested from 0.5 s to 63 s). The tile filter flushes a
 * last, partly filled sheet at the end of the stream (ffmpeg 5.1, tested).
 */
export function storyboardFilter(plan: StoryboardPlan): string {
  return [
    // round=up: tick k takes the last frame at or before k x interval (the default, near,
    // takes the one just before the next half interval). start_time=0: tick 0 is at 0 even
    // where the video starts late (its first frame fills in).
    `fps=${framesPerSecond(plan.intervalMs)}:start_time=0:round=up`,
    'tpad=stop=-1:stop_mode=clone',
    `trim=end_frame=${plan.count}`,
    `scale=${plan.tileWidth}:${plan.tileHeight}:flags=bicubic`,
    'setsar=1',
    // Full-range 4:2:0, the JPEG every decoder takes (the mjpeg encoder would pick 4:4:4 for RGB input).
    'format=yuvj420p',
    `tile=${plan.columns}x${plan.rows}`,
  ].join(',');
}

/**
 * The poster branch: the frame at the plan's time, then the branch closes (the second trim
 * passes one frame), so the split stops feeding it and the renditions run on unhindered.
 * A video that ends before that time (a container that overstates its duration) gives its
 * last frame: tpad repeats it, at the steady rate fps sets (tpad steps its timestamps by
 * the link's frame rate, which a variable-rate input leaves unset).
 */
export function posterFilter(plan: StoryboardPlan): string {
  const { atSecs, width, height } = plan.poster;
  return [
    `fps=${POSTER_FPS}`,
    'tpad=stop=-1:stop_mode=clone',
    `trim=start=${atSecs.toFixed(3)}`,
    'trim=end_frame=1',
    `scale=${width}:${height}:flags=bicubic`,
    'setsar=1',
    'format=yuvj420p',
  ].join(',');
}

/** Sheet `i`'s file name (from 0, as the segments are numbered). */
export const sheetFileName = (i: number): string => `sprite-${i}.jpg`;
export const STORYBOARD_VTT = 'thumbnails.vtt';
export const POSTER_FILE = 'poster.jpg';

/** The graph's labels for the two branches; `thumbs_` keeps them apart from the renditions'. */
const LABELS = {
  sheetsIn: 'thumbs_sheets_in',
  posterIn: 'thumbs_poster_in',
  sheets: 'thumbs_sheets',
  poster: 'thumbs_poster',
};

/**
 * The filter chains and output arguments for the storyboard and the poster, fed from one
 * output of the caller's split (`inputLabel`, without brackets), writing into `dir` (which
 * must exist: the image2 muxer creates no folders).
 */
export function thumbnailBranches(
  plan: StoryboardPlan,
  o: { inputLabel: string; dir: string },
): { filters: string[]; outputArgs: string[] } {
  const filters = [
    `[${o.inputLabel}]split=2[${LABELS.sheetsIn}][${LABELS.posterIn}]`,
    `[${LABELS.sheetsIn}]${storyboardFilter(plan)}[${LABELS.sheets}]`,
    `[${LABELS.posterIn}]${posterFilter(plan)}[${LABELS.poster}]`,
  ];
  // passthrough: each sheet and the poster written once, never duplicated to fill a frame rate.
  const image = ['-fps_mode', 'passthrough', '-c:v', 'mjpeg', '-f', 'image2'];
  const outputArgs = [
    ...['-map', `[${LABELS.sheets}]`, ...image, '-q:v', '5', '-start_number', '0', `${o.dir}/sprite-%d.jpg`],
    ...[
      '-map',
      `[${LABELS.poster}]`,
      ...image,
      '-q:v',
      '3',
      '-frames:v',
      '1',
      '-update',
      '1',
      `${o.dir}/${POSTER_FILE}`,
    ],
  ];
  return { filters, outputArgs };
}

/**
 * The WebVTT storyboard (W3C WebVTT): cue k covers [k, k+1) intervals and shows tile k; the
 * last cue ends at the duration, so the cues cover it exactly, without gaps. `sheetUri` is
 * how the VTT names sheet i (relative to the VTT itself by default).
 */
export function storyboardVtt(plan: StoryboardPlan, sheetUri: (i: number) => string = sheetFileName): string {
  const perSheet = plan.columns * plan.rows;
  const lines = ['WEBVTT', ''];
  for (let k = 0; k < plan.count; k++) {
    const start = k * plan.intervalMs;
    const end = Math.min(start + plan.intervalMs, plan.durationMs);
    const at = k % perSheet;
    const x = (at % plan.columns) * plan.tileWidth;
    const y = Math.floor(at / plan.columns) * plan.tileHeight;
    lines.push(
      `${vttTime(start)} --> ${vttTime(end)}`,
      `${sheetUri(Math.floor(k / perSheet))}#xywh=${x},${y},${plan.tileWidth},${plan.tileHeight}`,
      '',
    );
  }
  return lines.join('\n');
}

/** hh:mm:ss.ttt (WebVTT timestamps; hours always written, as players accept). */
function vttTime(ms: number): string {
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor(ms / 60_000) % 60;
  const s = Math.floor(ms / 1000) % 60;
  return `${pad(h)}:${pad(m)}:${pad(s)}.${pad(ms % 1000, 3)}`;
}
