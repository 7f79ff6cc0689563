import type Hls from 'hls.js';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { ErrorText } from './ErrorText.tsx';
import { Icon } from './Icon.tsx';
import { duration } from '../format.ts';
import { cueAt, parseStoryboard, type StoryboardCue } from '../storyboard.ts';

// The asset page's player: hls.js (imported when the page opens, so the console's first load
// stays small) on a <video> and one set of controls, the console's own: play, a seek bar that
// shows the storyboard frame of the time under the pointer (or the keyboard's value), the
// time, mute, full screen and a rendition switch over hls.js's levels. The browser's native
// controls stay off: with them there were two seek bars and two time displays.
// A live stream's page plays with `live`: hls.js in low-latency mode (Apple's LL-HLS, RFC
// 8216bis: parts and blocking playlist reloads) and no seek bar, since the edge moves.

interface Level {
  height: number;
  bitrate: number;
}

function useHls(video: HTMLVideoElement | null, o: { src: string; live: boolean; onFatal: () => void }) {
  const { src, live, onFatal } = o;
  const hls = useRef<Hls | null>(null);
  const [levels, setLevels] = useState<Level[]>([]);
  const [playing, setPlaying] = useState<number | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    if (!video) return;
    let gone = false;
    void (async () => {
      const { default: HlsJs } = await import('hls.js');
      if (gone) return;
      if (!HlsJs.isSupported()) {
        if (video.canPlayType('application/vnd.apple.mpegurl')) video.src = src;
        else setError(new Error('This browser cannot play HLS.'));
        return;
      }
      // An asset still processing plays EVENT playlists (they grow as its pieces finish), which
      // hls.js would start at their end, as it starts a live stream: an asset starts at 0.
      const h = new HlsJs(live ? { lowLatencyMode: true } : { startPosition: 0 });
      hls.current = h;
      h.on(HlsJs.Events.MANIFEST_PARSED, (_e, d) =>
        setLevels(d.levels.map((l) => ({ height: l.height, bitrate: l.bitrate }))),
      );
      h.on(HlsJs.Events.LEVEL_SWITCHED, (_e, d) => setPlaying(d.level));
      h.on(HlsJs.Events.ERROR, (_e, d) => {
        if (!d.fatal) return;
        setError(new Error(`Playback failed: ${d.details}${d.response ? ` (HTTP ${d.response.code})` : ''}`));
        onFatal();
      });
      h.loadSource(src);
      h.attachMedia(video);
    })().catch(setError);
    return () => {
      gone = true;
      hls.current?.destroy();
      hls.current = null;
    };
  }, [video, src, live]);
  const choose = (level: number) => {
    // currentLevel switches at once (the buffer is flushed); -1 is automatic again.
    if (hls.current) hls.current.currentLevel = level;
  };
  return { levels, playing, error, choose };
}

const levelName = (l: Level | undefined) =>
  l ? `${l.height}p (${(l.bitrate / 1e6).toFixed(l.bitrate < 1e6 ? 2 : 1)} Mbps)` : '';

function useStoryboard(url: string | undefined): StoryboardCue[] {
  const [cues, setCues] = useState<StoryboardCue[]>([]);
  useEffect(() => {
    if (!url) return;
    const abs = new URL(url, location.href).href;
    // /media needs no key: a plain fetch, as a player would.
    void fetch(abs)
      .then((r) => (r.ok ? r.text() : ''))
      .then((text) => setCues(parseStoryboard(text, abs)))
      .catch(() => setCues([]));
  }, [url]);
  return cues;
}

function useMediaState(video: HTMLVideoElement | null) {
  const [state, setState] = useState({ time: 0, total: 0, paused: true, muted: false });
  useEffect(() => {
    if (!video) return;
    const read = () =>
      setState({
        time: video.currentTime,
        total: Number.isFinite(video.duration) ? video.duration : 0,
        paused: video.paused,
        muted: video.muted,
      });
    const events = ['timeupdate', 'seeked', 'durationchange', 'play', 'pause', 'ended', 'volumechange'];
    for (const e of events) video.addEventListener(e, read);
    read();
    return () => {
      for (const e of events) video.removeEventListener(e, read);
    };
  }, [video]);
  return state;
}

function Preview({ cue, left, at }: { cue: StoryboardCue; left: number; at: number }) {
  return (
    <div
      class="storyboard"
      data-testid="storyboard"
      aria-hidden="true"
      style={{
        left: `${left}px`,
        width: `${cue.w}px`,
        height: `${cue.h}px`,
        backgroundImage: `url("${cue.url}")`,
        backgroundPosition: `-${cue.x}px -${cue.y}px`,
      }}
    >
      <span>{duration(at)}</span>
    </div>
  );
}

/** The preview's centre, kept so the whole frame shows over a bar `bar` px wide. */
function within(left: number, w: number, bar: number | undefined): number {
  if (!bar || bar < w) return left;
  return Math.min(Math.max(left, w / 2), bar - w / 2);
}

function SeekBar(props: { video: HTMLVideoElement | null; cues: StoryboardCue[]; time: number; total: number }) {
  const { video, cues, time, total } = props;
  const id = useId();
  const wrap = useRef<HTMLDivElement>(null);
  const [hover, setHover] = useState<{ left: number; at: number } | undefined>(undefined);
  const showAt = (at: number) => {
    const w = wrap.current?.clientWidth ?? 0;
    if (total > 0) setHover({ left: (at / total) * w, at });
  };
  const onMove = (e: PointerEvent) => {
    const rect = wrap.current?.getBoundingClientRect();
    if (!rect || total <= 0) return;
    const frac = Math.min(1, Math.max(0, (e.clientX - rect.left) / rect.width));
    setHover({ left: frac * rect.width, at: frac * total });
  };
  const cue = hover && cueAt(cues, hover.at);
  return (
    <div class="seek" ref={wrap} onPointerMove={onMove} onPointerLeave={() => setHover(undefined)}>
      {hover && cue && <Preview cue={cue} left={within(hover.left, cue.w, wrap.current?.clientWidth)} at={hover.at} />}
      <label for={id} class="visually-hidden">
        Seek
      </label>
      <input
        id={id}
        type="range"
        min={0}
        max={total || 0}
        step={0.1}
        value={time}
        aria-valuetext={`${duration(time)} of ${duration(total)}`}
        onInput={(e) => {
          const t = Number(e.currentTarget.value);
          if (video) video.currentTime = t;
          showAt(t);
        }}
        onBlur={() => setHover(undefined)}
      />
    </div>
  );
}

/** Play, seek, time, mute and full screen: the player's one set of controls (live: no seek, no time). */
function Controls(props: {
  video: HTMLVideoElement | null;
  box: HTMLElement | null;
  cues: StoryboardCue[];
  live: boolean;
}) {
  const { video } = props;
  const { time, total, paused, muted } = useMediaState(video);
  const toggle = () => {
    if (!video) return;
    if (video.paused) void video.play().catch(() => undefined);
    else video.pause();
  };
  const fullScreen = () => {
    if (document.fullscreenElement) void document.exitFullscreen();
    else void props.box?.requestFullscreen?.().catch(() => undefined);
  };
  return (
    <div class="player-bar">
      <button type="button" class="btn player-btn" onClick={toggle} aria-label={paused ? 'Play' : 'Pause'}>
        <Icon name={paused ? 'play' : 'pause'} />
      </button>
      {props.live ? (
        <span class="player-live">Live</span>
      ) : (
        <>
          <SeekBar video={video} cues={props.cues} time={time} total={total} />
          <span class="player-time" aria-hidden="true">
            {duration(time)} / {duration(total)}
          </span>
        </>
      )}
      <button
        type="button"
        class="btn player-btn"
        onClick={() => {
          if (video) video.muted = !video.muted;
        }}
        aria-pressed={muted}
        aria-label="Mute"
      >
        <Icon name={muted ? 'muted' : 'volume'} />
      </button>
      <button type="button" class="btn player-btn" onClick={fullScreen} aria-label="Full screen">
        <Icon name="fullscreen" />
      </button>
    </div>
  );
}

export function Player(props: {
  src: string;
  poster?: string | undefined;
  storyboard?: string | undefined;
  /** A live stream: hls.js in low-latency mode, no seek bar. */
  live?: boolean;
  /** hls.js gave up (a live stream that ended answers 404). */
  onFatal?(): void;
  onVideo?(video: HTMLVideoElement | null): void;
}) {
  const live = props.live ?? false;
  const [video, setVideo] = useState<HTMLVideoElement | null>(null);
  const onVideo = useRef(props.onVideo);
  onVideo.current = props.onVideo;
  // A stable ref callback: a new function each render would detach and attach the element
  // every time, and each attach would start hls.js over.
  const setRef = useCallback((el: HTMLVideoElement | null) => {
    setVideo(el);
    onVideo.current?.(el);
  }, []);
  const onFatal = useRef(props.onFatal);
  onFatal.current = props.onFatal;
  const { levels, playing, error, choose } = useHls(video, {
    src: props.src,
    live,
    onFatal: () => onFatal.current?.(),
  });
  const cues = useStoryboard(props.storyboard);
  const select = useId();
  const [box, setBox] = useState<HTMLDivElement | null>(null);
  return (
    <div>
      <div class="player" ref={setBox}>
        {/* biome-ignore lint/a11y/useMediaCaption: assets carry no caption track to offer here */}
        <video
          ref={setRef}
          playsInline
          poster={props.poster}
          aria-label="Video player"
          onClick={(e) => {
            const v = e.currentTarget;
            if (v.paused) void v.play().catch(() => undefined);
            else v.pause();
          }}
        />
        <Controls video={video} box={box} cues={cues} live={live} />
      </div>
      <div class="controls">
        <label for={select}>Rendition</label>
        <select id={select} onChange={(e) => choose(Number(e.currentTarget.value))}>
          <option value={-1}>Auto</option>
          {levels.map((l, i) => (
            <option key={`${l.height}-${l.bitrate}`} value={i}>
              {levelName(l)}
            </option>
          ))}
        </select>
        <span role="status" class="hint">
          {playing !== undefined && `Playing ${levelName(levels[playing])}`}
        </span>
      </div>
      <ErrorText error={error} />
    </div>
  );
}
