// The storyboard of an asset: its Thumbnails WebVTT (W3C WebVTT) whose cue payloads point
// into JPEG sprite sheets with a `#xywh=x,y,w,h` media fragment (W3C Media Fragments), the
// convention of Video.js, Vidstack and Mux. The sheet URLs are relative to the VTT's.

export interface StoryboardCue {
  /** Seconds. */
  start: number;
  end: number;
  /** The sheet, absolute. */
  url: string;
  x: number;
  y: number;
  w: number;
  h: number;
}

/** "01:02:03.500" or "02:03.500" -> seconds. */
export function vttSeconds(t: string): number {
  const parts = t.trim().split(':').map(Number);
  return parts.reduce((acc, p) => acc * 60 + p, 0);
}

export function parseStoryboard(vtt: string, base: string): StoryboardCue[] {
  const cues: StoryboardCue[] = [];
  const lines = vtt.replace(/\r\n?/g, '\n').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const timing = /^\s*([\d:.]+)\s+-->\s+([\d:.]+)/.exec(lines[i] ?? '');
    if (!timing) continue;
    const payload = (lines[i + 1] ?? '').trim();
    const m = /^(.*)#xywh=(\d+),(\d+),(\d+),(\d+)$/.exec(payload);
    if (!m) continue;
    cues.push({
      start: vttSeconds(timing[1] ?? '0'),
      end: vttSeconds(timing[2] ?? '0'),
      url: new URL(m[1] ?? '', base).href,
      x: Number(m[2]),
      y: Number(m[3]),
      w: Number(m[4]),
      h: Number(m[5]),
    });
  }
  return cues;
}

/** The cue showing at `t` seconds (the last one past the end). */
export function cueAt(cues: StoryboardCue[], t: number): StoryboardCue | undefined {
  return cues.find((c) => t >= c.start && t < c.end) ?? (t >= (cues.at(-1)?.end ?? Infinity) ? cues.at(-1) : undefined);
}
