// Runs in Chromium (test/helpers/live.ts watchLatency): plays one HLS URL with hls.js and, on
// every requestVideoFrameCallback, draws the top band of the presented frame on a canvas and
// reads the frame number from its cells (decodeFrameCells, sent from live.ts). Reports each
// frame's number and presentation time; leaves no player or media element behind.
/* global Hls, decodeFrameCells */

/** Canvas size the band is drawn at: 8 px per cell across, 8 rows. */
const CELL_PX = 8;
const BAND_ROWS = 8;

function until(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

/** Watches playback: { url, lowLatency, seconds, startTimeoutMs, band, cells, hlsConfig }. */
// biome-ignore lint/correctness/noUnusedVariables: called by name from live.ts
async function watchFrames(o) {
  const video = document.createElement('video');
  video.muted = true;
  video.playsInline = true;
  document.body.append(video);
  const canvas = document.createElement('canvas');
  canvas.width = CELL_PX * o.cells;
  canvas.height = BAND_ROWS;
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  const state = { samples: [], unreadable: 0, log: [], error: undefined, first: undefined, done: false };
  const hls = new Hls({ lowLatencyMode: o.lowLatency, ...o.hlsConfig });
  hls.on(Hls.Events.ERROR, (_e, d) => {
    if (d.fatal) state.error ??= `hls.js fatal ${d.type}: ${d.details}${d.response ? ` (${d.response.code})` : ''}`;
    else state.log.push(`hls.js: ${d.details}`);
  });
  hls.on(Hls.Events.MANIFEST_PARSED, () => {
    video.play().catch((e) => {
      state.error ??= `play() refused: ${e.message}`;
    });
  });
  const onFrame = (_now, meta) => {
    if (state.done) return;
    // The moment the frame is expected on screen, on the same clock as Date.now() in Node.
    const wall = performance.timeOrigin + meta.expectedDisplayTime;
    const h = video.videoHeight * o.band;
    ctx.drawImage(video, 0, 0, video.videoWidth, h, 0, 0, canvas.width, canvas.height);
    const n = decodeFrameCells(
      ctx.getImageData(0, 0, canvas.width, canvas.height).data,
      canvas.width,
      canvas.height,
      o.cells,
    );
    if (n === undefined) state.unreadable++;
    else {
      state.samples.push({ n, wall });
      state.first ??= wall;
    }
    video.requestVideoFrameCallback(onFrame);
  };
  video.requestVideoFrameCallback(onFrame);
  hls.loadSource(o.url);
  hls.attachMedia(video);
  const began = Date.now();
  while (!state.error) {
    if (state.first === undefined && Date.now() - began > o.startTimeoutMs) {
      state.error = `no frame presented after ${o.startTimeoutMs} ms: readyState ${video.readyState}, currentTime ${video.currentTime}`;
      break;
    }
    if (state.first !== undefined && Date.now() - state.first >= o.seconds * 1000) break;
    await until(50);
  }
  state.done = true;
  const result = {
    samples: state.samples,
    unreadable: state.unreadable,
    videoHeight: video.videoHeight,
    log: state.log.slice(0, 50),
    ...(Number.isFinite(hls.latency) ? { hlsLatency: hls.latency } : {}),
    ...(Number.isFinite(hls.targetLatency) ? { hlsTargetLatency: hls.targetLatency } : {}),
    ...(state.error ? { error: state.error } : {}),
  };
  hls.destroy();
  video.remove();
  return result;
}
