import { inputArgs } from './media-input.ts';

// Thumbnails (issue #19): a storyboard (JPEG sprite sheets plus a WebVTT file whose cues
// point into them with `#xywh=x,y,w,h`, the convention Video.js, Vidstack and Mux players
// read) and a poster image, both made in the transcode's own ffmpeg run as two more branches
// of its split. The storyboard branch runs at a frame every few seconds, so it costs little
// beside the renditions; the poster branch passes one frame and closes. A split run's chunks
// each make their part of the same storyboard (storyboardPart: the tiles whose cues start in
// the chunk, raw, and the poster where its time falls) and the stitch encodes the sheets
// from the tiles (sheetsFromTilesArgs), so both come out as the single run's.

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
/** Full-range 4:2:0, the JPEG every decoder takes (the mjpeg encoder would pick 4:4:4 for RGB input). */
const JPEG_PIXELS = 'yuvj420p';

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
  return [...tileChain(plan, { firstTile: 0, tiles: plan.count }), tileGrid(plan)].join(',');
}

/** The sheets' grid: the tiles in rows, a sheet per `columns` x `rows` of them. */
const tileGrid = (plan: StoryboardPlan): string => `tile=${plan.columns}x${plan.rows}`;

/** Tiles `firstTile` to `firstTile + tiles - 1`, each the frame shown at its cue's start, at the tile size. */
function tileChain(plan: StoryboardPlan, o: { firstTile: number; tiles: number }): string[] {
  return [
    // round=up: tick k takes the last frame at or before k x interval (the default, near,
    // takes the one just before the next half interval). start_time: the first tick is at
    // the first tile's time even where the video starts late (its first frame fills in).
    `fps=${framesPerSecond(plan.intervalMs)}:start_time=${(o.firstTile * plan.intervalMs) / 1000}:round=up`,
    'tpad=stop=-1:stop_mode=clone',
    `trim=end_frame=${o.tiles}`,
    `scale=${plan.tileWidth}:${plan.tileHeight}:flags=bicubic`,
    'setsar=1',
    `format=${JPEG_PIXELS}`,
  ];
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
    `format=${JPEG_PIXELS}`,
  ].join(',');
}

/** Sheet `i`'s file name (from 0, as the segments are numbered). */
export const sheetFileName = (i: number): string => `sprite-${i}.jpg`;
export const STORYBOARD_VTT = 'thumbnails.vtt';
export const POSTER_FILE = 'poster.jpg';
/** A chunk's tiles, raw pictures one after the other (see storyboardPartBranches). */
export const TILES_FILE = 'tiles.yuv';

/** The bytes of one raw tile: 4:2:0 at an even size is one and a half bytes a pixel. */
export const tileBytes = (plan: StoryboardPlan): number => (plan.tileWidth * plan.tileHeight * 3) / 2;

/** The graph's labels for the branches; `thumbs_` keeps them apart from the renditions'. */
const LABELS = {
  sheetsIn: 'thumbs_sheets_in',
  posterIn: 'thumbs_poster_in',
  sheets: 'thumbs_sheets',
  poster: 'thumbs_poster',
};

/** passthrough: each picture written once, never duplicated to fill a frame rate. */
const IMAGE = ['-fps_mode', 'passthrough', '-c:v', 'mjpeg', '-f', 'image2'];

const sheetsOutput = (dir: string): string[] => [...IMAGE, '-q:v', '5', '-start_number', '0', `${dir}/sprite-%d.jpg`];

const posterOutput = (dir: string): string[] => [
  ...IMAGE,
  '-q:v',
  '3',
  '-frames:v',
  '1',
  '-update',
  '1',
  `${dir}/${POSTER_FILE}`,
];

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
  const outputArgs = [
    ...['-map', `[${LABELS.sheets}]`, ...sheetsOutput(o.dir)],
    ...['-map', `[${LABELS.poster}]`, ...posterOutput(o.dir)],
  ];
  return { filters, outputArgs };
}

/** The part of the storyboard one chunk of a split run makes (transcode/chunked/). */
export interface StoryboardPart {
  /** Its first tile: the index of the first cue that starts in the chunk. */
  firstTile: number;
  /** How many tiles it makes from there: those of every cue that starts in the chunk. */
  tiles: number;
  /** Whether it makes the poster: the poster's time falls in the chunk. */
  poster: boolean;
}

/**
 * The tiles and the poster whose times fall in [startSecs, endSecs) of the whole (endSecs
 * undefined: to the end, the last chunk). Chunks that meet at a time split the cues between
 * them, every cue in exactly one.
 */
export function storyboardPart(plan: StoryboardPlan, span: { startSecs: number; endSecs?: number }): StoryboardPart {
  // A cue on the boundary (within float noise) is the later chunk's.
  const tileAt = (secs: number): number =>
    Math.min(plan.count, Math.max(0, Math.ceil((secs * 1000) / plan.intervalMs - 1e-6)));
  const firstTile = tileAt(span.startSecs);
  const end = span.endSecs === undefined ? plan.count : tileAt(span.endSecs);
  const at = plan.poster.atSecs;
  const poster = at >= span.startSecs - 1e-6 && (span.endSecs === undefined || at < span.endSecs - 1e-6);
  return { firstTile, tiles: Math.max(0, end - firstTile), poster };
}

/** Whether a chunk's part of the storyboard has anything to make. */
export const partMakes = (part: StoryboardPart): boolean => part.tiles > 0 || part.poster;

/**
 * A chunk's branches: its tiles, as raw pictures into `dir`/TILES_FILE (the stitch encodes
 * the sheets from them once, as the single run does, so no tile is encoded twice), and the
 * poster when it holds its time, with the single run's chains. `offsetSecs`: where the
 * chunk's decoded input starts in the whole (its seek), so the frame-rate filters tick on
 * the whole run's grid and pick the single run's frames.
 */
export function storyboardPartBranches(
  plan: StoryboardPlan,
  part: StoryboardPart,
  o: { inputLabel: string; dir: string; offsetSecs: number },
): { filters: string[]; outputArgs: string[] } {
  const heads = [part.tiles > 0 ? LABELS.sheetsIn : '', part.poster ? LABELS.posterIn : ''].filter(Boolean);
  const filters = [
    `[${o.inputLabel}]setpts=PTS+${o.offsetSecs.toFixed(6)}/TB,split=${heads.length}${heads.map((h) => `[${h}]`).join('')}`,
  ];
  const outputArgs: string[] = [];
  if (part.tiles > 0) {
    filters.push(`[${LABELS.sheetsIn}]${tileChain(plan, part).join(',')}[${LABELS.sheets}]`);
    outputArgs.push(
      '-map',
      `[${LABELS.sheets}]`,
      '-fps_mode',
      'passthrough',
      '-c:v',
      'rawvideo',
      '-f',
      'rawvideo',
      `${o.dir}/${TILES_FILE}`,
    );
  }
  if (part.poster) {
    filters.push(`[${LABELS.posterIn}]${posterFilter(plan)}[${LABELS.poster}]`);
    outputArgs.push('-map', `[${LABELS.poster}]`, ...posterOutput(o.dir));
  }
  return { filters, outputArgs };
}

/**
 * The stitch's ffmpeg arguments for the sheets from every chunk's tiles in order (`tiles`,
 * raw): the single run's grid and encode, so the sheets are the single run's.
 */
export function sheetsFromTilesArgs(plan: StoryboardPlan, o: { tiles: string; dir: string }): string[] {
  const size = `${plan.tileWidth}x${plan.tileHeight}`;
  return [
    ...['-pix_fmt', JPEG_PIXELS, '-video_size', size, '-framerate', '1', ...inputArgs(o.tiles, 'our-tiles')],
    ...['-vf', `setsar=1,${tileGrid(plan)}`, ...sheetsOutput(o.dir)],
  ];
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
