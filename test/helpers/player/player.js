// Runs in Chromium (test/helpers/browser.ts calls these functions one play at a time in one
// page): plays one manifest or file with hls.js, shaka-player or a bare media element,
// reports what the player saw, and leaves no player or media element behind. Globals Hls and shaka come from the dist files player.html loads.
/* global Hls, shaka */

/** Seconds of playback that count as "it plays" (short clips: up to the end instead). */
const PLAY_SECONDS = 1;
/** Bounds how long a broken output may hang a play, well inside the test's own timeout. */
const GIVE_UP_MS = 20_000;

function mediaElement() {
  const video = document.createElement('video');
  video.muted = true;
  video.playsInline = true;
  document.body.append(video);
  return video;
}

function mediaErrorText(media) {
  const e = media.error;
  return e ? `media element error ${e.code}: ${e.message || 'no message'}` : undefined;
}

function cueCount(media) {
  let n = 0;
  for (const track of media.textTracks) n += track.cues ? track.cues.length : 0;
  return n;
}

/**
 * Waits until currentTime passed PLAY_SECONDS (or `until`, or the end of a clip shorter than
 * that), a fatal error was reported, or GIVE_UP_MS passed. `extra()` lets a caller also wait
 * for something else (subtitle cues) before counting the play as done.
 */
function watchPlayback(media, state, extra = () => true, until = PLAY_SECONDS) {
  const started = Date.now();
  return new Promise((resolve) => {
    const tick = () => {
      const error = state.error ?? mediaErrorText(media);
      const target = Number.isFinite(media.duration) ? Math.min(until, media.duration - 0.25) : until;
      const advanced = media.ended || (target > 0 && media.currentTime >= target);
      if (error) return resolve(error);
      if (advanced && extra()) return resolve(undefined);
      if (Date.now() - started > GIVE_UP_MS)
        return resolve(
          `no playback after ${GIVE_UP_MS} ms: currentTime ${media.currentTime}, readyState ${media.readyState}, ` +
            `networkState ${media.networkState}, buffered ${bufferedText(media)}, text cues ${cueCount(media)}`,
        );
      setTimeout(tick, 50);
    };
    tick();
  });
}

function bufferedText(media) {
  const ranges = [];
  for (let i = 0; i < media.buffered.length; i++)
    ranges.push(`${media.buffered.start(i).toFixed(2)}-${media.buffered.end(i).toFixed(2)}`);
  return ranges.join(',') || 'nothing';
}

function startPlaying(media, state) {
  media.play().catch((e) => {
    state.error ??= `play() refused: ${e.message}`;
  });
}

function commonResult(media, error, state = {}) {
  const buffered = [];
  for (let i = 0; i < media.buffered.length; i++) buffered.push([media.buffered.start(i), media.buffered.end(i)]);
  return {
    played: media.currentTime,
    ended: media.ended,
    duration: media.duration,
    videoHeight: media.videoHeight,
    cues: cueCount(media),
    buffered,
    ...(state.startedAt !== undefined ? { startedAt: state.startedAt, stalls: state.stalls } : {}),
    ...(error ? { error } : {}),
  };
}

/**
 * For a play from `start` (issue #30: across a chunk seam): where playback began, and how
 * often it stalled for data after that (a hole in the timeline stalls a player).
 */
function watchStalls(media, state) {
  state.stalls = 0;
  media.addEventListener('playing', () => {
    state.startedAt ??= media.currentTime;
  });
  media.addEventListener('waiting', () => {
    if (state.startedAt !== undefined) state.stalls++;
  });
}

/** The currentTime a play from opts.start must pass: start + opts.seconds (PLAY_SECONDS when absent). */
const untilOf = (opts) => (opts.start ?? 0) + (opts.seconds ?? PLAY_SECONDS);

/** Resolves with undefined once `promise` settles, or with the fatal error reported into `state` first. */
function unlessFailed(promise, state) {
  const started = Date.now();
  return new Promise((resolve) => {
    let settled = false;
    promise.then(() => {
      settled = true;
      resolve(undefined);
    });
    const poll = () => {
      if (settled) return;
      if (state.error || Date.now() - started > GIVE_UP_MS) {
        settled = true;
        return resolve(state.error ?? `no manifest after ${GIVE_UP_MS} ms`);
      }
      setTimeout(poll, 50);
    };
    poll();
  });
}

function hlsErrorText(data) {
  const detail = data.error?.message ?? data.reason ?? data.response?.code ?? '';
  const url = data.frag?.url ?? data.context?.url ?? data.url ?? '';
  return `hls.js ${data.type} ${data.details}${detail ? `: ${detail}` : ''}${url ? ` (${url})` : ''}`;
}

/**
 * opts.level: the index of the level to play, locked (ABR off); opts.subtitles: turn the
 * first subtitle track on and wait for its cues; opts.start, opts.seconds: play from `start`
 * for `seconds`.
 */
window.playHls = async (url, opts = {}) => {
  const media = mediaElement();
  const state = { error: undefined };
  watchStalls(media, state);
  const hls = new Hls({
    startLevel: opts.level ?? -1,
    capLevelToPlayerSize: false,
    ...(opts.start !== undefined ? { startPosition: opts.start } : {}),
  });
  const fragmentLevels = new Set();
  const switchedTo = [];
  hls.on(Hls.Events.ERROR, (_event, data) => {
    if (data.fatal) state.error ??= hlsErrorText(data);
  });
  hls.on(Hls.Events.FRAG_BUFFERED, (_event, data) => {
    if (data.frag.type === 'main') fragmentLevels.add(data.frag.level);
  });
  hls.on(Hls.Events.LEVEL_SWITCHED, (_event, data) => switchedTo.push(data.level));
  const parsed = new Promise((resolve) => hls.once(Hls.Events.MANIFEST_PARSED, resolve));
  hls.attachMedia(media);
  hls.loadSource(url);
  const failed = await unlessFailed(parsed, state);
  if (!failed) {
    // Setting currentLevel locks it: hls.js stops switching by bandwidth.
    if (opts.level !== undefined) hls.currentLevel = opts.level;
    if (opts.subtitles && hls.subtitleTracks.length > 0) {
      hls.subtitleDisplay = true;
      hls.subtitleTrack = 0;
    }
    startPlaying(media, state);
  }
  const error =
    failed ?? (await watchPlayback(media, state, () => !opts.subtitles || cueCount(media) > 0, untilOf(opts)));
  const result = {
    ...commonResult(media, error, state),
    levels: hls.levels.map((l) => ({ height: l.height, codecs: l.attrs.CODECS ?? '' })),
    fragmentLevels: [...fragmentLevels].sort((a, b) => a - b),
    switchedTo,
    audioTracks: hls.audioTracks.map((t) => ({ lang: t.lang ?? '', name: t.name, default: t.default })),
    textTracks: hls.subtitleTracks.map((t) => ({ lang: t.lang ?? '', kind: 'subtitles' })),
  };
  hls.destroy();
  media.remove();
  return result;
};

function shakaErrorText(e) {
  return `shaka-player error ${e.code} (category ${e.category}): ${JSON.stringify(e.data).slice(0, 500)}`;
}

/** opts.videoCodec: prefer variants of this codec (e.g. 'av01'); opts.subtitles, opts.start, opts.seconds: as in playHls. */
window.playDash = async (url, opts = {}) => {
  const media = mediaElement();
  const state = { error: undefined };
  watchStalls(media, state);
  shaka.polyfill.installAll();
  const player = new shaka.Player();
  player.addEventListener('error', (event) => {
    state.error ??= shakaErrorText(event.detail);
  });
  // A missing manifest fails at once instead of after shaka-player's retries with backoff.
  player.configure({ manifest: { retryParameters: { maxAttempts: 1 } } });
  if (opts.videoCodec) player.configure({ preferredVideo: [{ codec: opts.videoCodec }] });
  let failed;
  try {
    await player.attach(media);
    await player.load(url, opts.start);
  } catch (e) {
    failed = e instanceof shaka.util.Error ? shakaErrorText(e) : String(e);
  }
  if (!failed) {
    if (opts.subtitles) {
      // shaka-player 5 shows a selected track (NativeTextDisplayer: the media element's textTracks).
      const text = player.getTextTracks()[0];
      if (text) player.selectTextTrack(text);
    }
    startPlaying(media, state);
  }
  const error =
    failed ?? (await watchPlayback(media, state, () => !opts.subtitles || cueCount(media) > 0, untilOf(opts)));
  const variants = player.getVariantTracks();
  const active = variants.find((t) => t.active);
  const levels = new Map();
  for (const t of variants) levels.set(`${t.height}/${t.codecs}`, { height: t.height, codecs: t.codecs ?? '' });
  const result = {
    ...commonResult(media, error, state),
    levels: [...levels.values()],
    playing: active ? { height: active.height, codecs: active.codecs ?? '' } : undefined,
    audioTracks: player.getAudioTracks().map((t) => ({ lang: t.language, name: t.label ?? '', default: t.primary })),
    textTracks: player
      .getTextTracks()
      .map((t) => ({ lang: t.language, kind: t.kind === 'caption' ? 'captions' : 'subtitles' })),
  };
  await player.destroy();
  media.remove();
  return result;
};

/** A progressive file (MP4, M4A) in a bare media element, as a browser plays a download. */
window.playFile = async (url) => {
  const media = mediaElement();
  const state = { error: undefined };
  media.src = url;
  startPlaying(media, state);
  const error = await watchPlayback(media, state);
  const result = { ...commonResult(media, error), levels: [], audioTracks: [], textTracks: [] };
  media.removeAttribute('src');
  media.load();
  media.remove();
  return result;
};
