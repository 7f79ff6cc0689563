import { InputUnreadableError } from '../../lib/errors.ts';
import { type Box, BoxSplitter, type InitInfo, mainTrackFragment, readFragment, readInit } from './fmp4.ts';
import { numberingAt, parseFileName, type RenditionNumbering } from './names.ts';
import { mediaPlaylist, type RenditionReport } from './playlist.ts';
import { holds, isNextPart, type ReloadDirectives, refusal } from './reload.ts';
import { RenditionTaps } from './taps.ts';
import type { LlhlsTiming, Part, PlaylistAnswer, RenditionStats, RenditionTap, Run, Segment } from './types.ts';
import { ChangeWaiters } from './waiters.ts';

// One rendition of a live ladder packaged as low-latency HLS (RFC 8216bis) from the fragmented
// MP4 one ffmpeg writes: each moof+mdat is a part, a part that starts with a keyframe starts a
// segment. Parts and segments live in memory for the window; blocked requests share one wake-up.

export interface PlaylistRequest extends ReloadDirectives {
  uriQuery?: string | undefined;
  signal?: AbortSignal | undefined;
  others?: readonly LiveRendition[] | undefined;
}

/** A box bigger than this is a broken stream, not a part (a part of a 4K source is a few MB). */
const MAX_BOX_BYTES = 64 * 1024 * 1024;
/** Distinct playlist texts kept between two changes (viewers with tokens of their own each have one). */
const MAX_RENDERS = 256;
/** RFC 8216bis, 6.2.5.2: a server SHOULD answer 503 when it cannot answer within three target durations. */
const HOLD_TARGET_DURATIONS = 3;

export class LiveRendition {
  readonly name: string;
  readonly #timing: LlhlsTiming;
  readonly #now: () => number;
  readonly #splitter = new BoxSplitter({ maxBoxBytes: MAX_BOX_BYTES });
  readonly #waiters = new ChangeWaiters();
  /** Playlist texts since the last change, by query and sibling positions. */
  readonly #renders = new Map<string, string>();
  readonly #taps = new RenditionTaps();
  #run: Run;
  #runs = new Map<number, Run>();
  #segments: Segment[] = [];
  #nextMsn: number;
  #discontinuitySequence = 0;
  #discontinuityPending = false;
  #ended = false;
  #longestPart = 0;
  /** One frame (sample) of the main track, from the first part. */
  #frameSecs = 0;
  #totals = {
    segments: 0,
    secs: 0,
    bytes: 0,
    maxSegmentSecs: 0,
    mediaSecs: 0,
    lastPartAt: undefined as number | undefined,
    unreadable: undefined as string | undefined,
  };

  constructor(o: { name: string; timing: LlhlsTiming; now?: () => number; numbering?: RenditionNumbering }) {
    this.name = o.name;
    this.#timing = o.timing;
    this.#now = o.now ?? Date.now;
    const numbering = o.numbering ?? numberingAt(this.#now());
    this.#nextMsn = numbering.firstMsn;
    this.#run = { number: numbering.firstRun, initBoxes: [], offset: 0, first: true };
    this.#runs.set(this.#run.number, this.#run);
  }

  /** Its first part is there. */
  get ready(): boolean {
    return this.#segments.length > 0;
  }

  /**
   * ffmpeg's fMP4 bytes as they come. Never throws (it runs in a pipe's data handler): bytes
   * that are not fragmented MP4 stop this run, `stats().unreadable` says why, and the parts
   * before stay served; restart() begins a new run.
   */
  write(chunk: Buffer): void {
    if (this.#ended || this.#run.unreadable !== undefined) return;
    try {
      for (const box of this.#splitter.push(chunk)) this.#onBox(box);
    } catch (err) {
      const unreadable = err instanceof InputUnreadableError ? err.message : `fMP4 packaging failed: ${String(err)}`;
      this.#run.unreadable = unreadable;
      this.#totals.unreadable = unreadable;
    }
  }

  /** Tells `t` every run's init (the current one's at once), every part and the end; returns its removal. */
  tap(t: RenditionTap): () => void {
    if (this.#ended) {
      t.end();
      return () => {};
    }
    const init = this.#run.init;
    if (init !== undefined) t.init(this.#run.number, init.bytes);
    return this.#taps.add(t);
  }

  /** A new ffmpeg run follows: a new init-{run}.mp4 and an EXT-X-DISCONTINUITY before its first segment. */
  restart(): void {
    if (this.#ended) return;
    // The dead run's partial box is not the start of the next run's bytes.
    this.#splitter.reset();
    this.#beginRun();
  }

  #beginRun(): void {
    this.#closeOpenSegment();
    const number = this.#run.number + 1;
    this.#run = { number, initBoxes: [], offset: this.#totals.mediaSecs, first: false };
    this.#runs.set(number, this.#run);
    this.#discontinuityPending = this.#segments.length > 0;
    this.#changed();
  }

  /** EXT-X-ENDLIST; blocked requests are answered. */
  end(): void {
    if (this.#ended) return;
    this.#closeOpenSegment();
    this.#ended = true;
    this.#changed();
    this.#taps.end();
  }

  stats(): RenditionStats {
    const init = this.#latestInit();
    const t = this.#totals;
    return {
      segments: t.segments,
      segmentsSecs: t.secs,
      bytes: t.bytes,
      mediaSecs: t.mediaSecs,
      maxSegmentSecs: t.maxSegmentSecs,
      blocked: this.#waiters.waiting,
      wakeUps: this.#waiters.wakeUps,
      ...(t.lastPartAt === undefined ? {} : { lastPartAt: t.lastPartAt }),
      ...(t.unreadable === undefined ? {} : { unreadable: t.unreadable }),
      ...(init?.codecs === undefined ? {} : { codecs: init.codecs }),
      ...(init?.width === undefined ? {} : { width: init.width }),
      ...(init?.height === undefined ? {} : { height: init.height }),
    };
  }

  /** The media playlist; with `msn` (and `part`) a blocking reload (RFC 8216bis, 6.2.5.2). */
  async playlist(req: PlaylistRequest): Promise<PlaylistAnswer> {
    // A server MUST ignore the directives once the playlist has EXT-X-ENDLIST (6.2.5.2).
    const refused = this.#ended
      ? undefined
      : refusal(req, this.#segments, {
          partTargetSecs: this.#partTarget(),
          nextMsn: this.#nextMsn,
        });
    if (refused !== undefined) return { status: 400, reason: refused };
    const { msn, part } = req;
    const ready =
      msn === undefined || this.#ended
        ? () => this.ready || this.#ended
        : () => this.#ended || holds(this.#segments, msn, part);
    const outcome = await this.#waiters.until(ready, { holdMs: this.#holdMs(), signal: req.signal });
    if (outcome === 'aborted') return { status: 503, reason: 'the request was aborted' };
    if (outcome === 'timeout') {
      const what = msn === undefined ? 'the first part' : part === undefined ? `segment ${msn}` : `part ${msn}.${part}`;
      return { status: 503, reason: `${what} did not come within the hold limit` };
    }
    return { status: 200, body: this.#render(req) };
  }

  /** init-R.mp4, S.m4s, S.P.m4s; the next part (the hinted one) is waited for; undefined: 404. */
  async file(name: string, signal?: AbortSignal): Promise<Buffer | undefined> {
    const file = parseFileName(name);
    if (file === undefined) return undefined;
    if (file.kind === 'init') return this.#runs.get(file.run)?.init?.bytes;
    if (file.kind === 'segment') return this.#segmentFile(file.msn);
    const { msn, part: index } = file;
    const find = (): Buffer | undefined => this.#segment(msn)?.parts[index]?.bytes;
    const next = (): boolean => !this.#ended && isNextPart(this.#segments, this.#nextMsn, msn, index);
    if (find() === undefined && next()) {
      await this.#waiters.until(() => find() !== undefined || !next(), {
        holdMs: this.#holdMs(),
        signal,
      });
    }
    return find();
  }

  #onBox(box: Box): void {
    switch (box.type) {
      case 'ftyp':
        // A new ffmpeg run without restart(): its init says so (the bytes after it are its own).
        if (this.#run.firstTime !== undefined) this.#beginRun();
        this.#run.initBoxes = [box.bytes];
        return;
      case 'moov': {
        const bytes = Buffer.concat([...this.#run.initBoxes, box.bytes]);
        this.#run.init = { bytes, info: readInit(bytes) };
        this.#run.initBoxes = [];
        this.#taps.init(this.#run.number, bytes);
        return;
      }
      case 'moof':
        this.#run.moof = box.bytes;
        return;
      case 'mdat': {
        const moof = this.#run.moof;
        this.#run.moof = undefined;
        if (moof !== undefined) this.#addPart(moof, box.bytes);
        return;
      }
      default:
        // styp, sidx, prft, free, the closing mfra: nothing a live playlist needs.
        return;
    }
  }

  #addPart(moof: Buffer, mdat: Buffer): void {
    const info = this.#run.init?.info;
    if (info === undefined)
      throw new InputUnreadableError('fragmented MP4 unreadable: a fragment before its init segment');
    const main = mainTrackFragment(readFragment(moof, info.tracks), info);
    const timescale = info.tracks.find((t) => t.trackId === main?.trackId)?.timescale ?? 1;
    const duration = (main?.duration ?? 0) / timescale;
    const start = (main?.baseMediaDecodeTime ?? 0) / timescale;
    const hasVideo = info.tracks.some((t) => t.handler === 'vide');
    const part: Part = {
      bytes: Buffer.concat([moof, mdat]),
      duration,
      independent: !hasVideo || main?.startsWithSync === true,
    };
    const open = this.#openSegment();
    const startsSegment = open === undefined || (hasVideo ? part.independent : this.#segmentFull(open.duration));
    if (startsSegment) this.#closeOpenSegment();
    const segment = startsSegment ? this.#newSegment(duration) : (open as Segment);
    segment.parts.push(part);
    this.#taps.part(this.#run.number, segment, part);
    segment.duration += duration;
    segment.bytes += part.bytes.length;
    this.#longestPart = Math.max(this.#longestPart, duration);
    if (main !== undefined && main.sampleDuration > 0 && this.#frameSecs === 0) {
      this.#frameSecs = main.sampleDuration / timescale;
    }
    this.#advanceMediaTime(start, duration);
    this.#changed();
  }

  #advanceMediaTime(start: number, duration: number): void {
    // The first run keeps ffmpeg's own clock; a later run continues where the previous one ended.
    if (this.#run.firstTime === undefined) this.#run.firstTime = this.#run.first ? 0 : start;
    this.#totals.mediaSecs = this.#run.offset + (start - this.#run.firstTime) + duration;
    this.#totals.lastPartAt = this.#now();
  }

  /** Without video every part is independent: a segment ends when it reaches the target. */
  #segmentFull(secs: number): boolean {
    return secs + this.#partTarget() / 2 >= this.#timing.segmentTargetSecs;
  }

  /** A segment starting with a part of `firstPartSecs`, which has just come whole. */
  #newSegment(firstPartSecs: number): Segment {
    const segment: Segment = {
      msn: this.#nextMsn++,
      run: this.#run.number,
      discontinuity: this.#discontinuityPending,
      // EXT-X-PROGRAM-DATE-TIME dates the segment's first sample: its part came whole once
      // its last frame was written, a part's duration later.
      programDateTime: this.#now() - Math.round(firstPartSecs * 1000),
      duration: 0,
      complete: false,
      parts: [],
      bytes: 0,
    };
    this.#discontinuityPending = false;
    this.#segments.push(segment);
    return segment;
  }

  #openSegment(): Segment | undefined {
    const last = this.#segments.at(-1);
    return last !== undefined && !last.complete ? last : undefined;
  }

  #closeOpenSegment(): void {
    const open = this.#openSegment();
    if (open === undefined) return;
    open.complete = true;
    const t = this.#totals;
    t.segments++;
    t.secs += open.duration;
    t.bytes += open.bytes;
    t.maxSegmentSecs = Math.max(t.maxSegmentSecs, open.duration);
    this.#trimWindow();
  }

  /** Drops the oldest segments while the rest still fill the window; their files then 404. */
  #trimWindow(): void {
    let total = this.#segments.reduce((sum, s) => sum + s.duration, 0);
    while (this.#segments.length > 1 && total - (this.#segments[0] as Segment).duration >= this.#timing.windowSecs) {
      total -= (this.#segments.shift() as Segment).duration;
    }
    const first = this.#segments[0];
    // The first listed segment carries no EXT-X-DISCONTINUITY tag: the sequence counts it.
    if (first?.discontinuity) {
      first.discontinuity = false;
      this.#discontinuitySequence++;
    }
    for (const number of this.#runs.keys()) {
      if (number !== this.#run.number && !this.#segments.some((s) => s.run === number)) this.#runs.delete(number);
    }
  }

  #segment(msn: number): Segment | undefined {
    const first = this.#segments[0];
    return first === undefined ? undefined : this.#segments[msn - first.msn];
  }

  #segmentFile(msn: number): Buffer | undefined {
    const segment = this.#segment(msn);
    if (segment === undefined || !segment.complete) return undefined;
    segment.whole ??= Buffer.concat(segment.parts.map((p) => p.bytes));
    return segment.whole;
  }

  /**
   * PART-TARGET, which no part may exceed, and which every part but a segment's last should
   * reach 85% of (RFC 8216bis, 4.4.4.9). ffmpeg ends a fragment on the first frame at or past
   * -frag_duration, so its longest part is that length rounded up to whole frames (8 frames,
   * 0.267 s, at 30 fps for 0.25 s): known from the first part on, so the value stays put.
   */
  #partTarget(): number {
    const frame = this.#frameSecs;
    const cut = frame > 0 ? Math.ceil(this.#timing.partTargetSecs / frame - 1e-6) * frame : this.#timing.partTargetSecs;
    return Math.ceil(Math.max(cut, this.#longestPart) * 1000 - 1e-6) / 1000;
  }

  /** EXT-X-TARGETDURATION: every segment's duration rounded to the nearest second fits (RFC 8216bis, 4.4.3.1). */
  #targetDuration(): number {
    const longest = Math.max(this.#totals.maxSegmentSecs, this.#openSegment()?.duration ?? 0);
    return Math.max(1, Math.ceil(this.#timing.segmentTargetSecs), Math.round(longest));
  }

  /** The target duration unrounded, for the hold limit (a short segment target gives a short hold). */
  #targetSecs(): number {
    return Math.max(this.#timing.segmentTargetSecs, this.#totals.maxSegmentSecs, this.#openSegment()?.duration ?? 0);
  }

  #holdMs(): number {
    return HOLD_TARGET_DURATIONS * this.#targetSecs() * 1000;
  }

  #latestInit(): InitInfo | undefined {
    return this.#run.init?.info ?? this.#runs.get(this.#segments.at(-1)?.run ?? -1)?.init?.info;
  }

  /** Where this rendition's newest part is, for the others' EXT-X-RENDITION-REPORT. */
  #report(): RenditionReport | undefined {
    const last = this.#segments.at(-1);
    if (last === undefined) return undefined;
    return { name: this.name, lastMsn: last.msn, lastPart: last.parts.length - 1 };
  }

  /** Something a playlist shows changed: its renders are stale, held requests re-check. */
  #changed(): void {
    this.#renders.clear();
    this.#waiters.wake();
  }

  /**
   * The playlist text. Held requests woken by one part all ask for the same text: it is
   * rendered once per query and sibling positions, not once per request.
   */
  #render(req: PlaylistRequest): string {
    // Only renditions of this class report (a wrapper passed by mistake is left out, not a TypeError).
    const others = (req.others ?? []).filter((r) => r !== this && #segments in r);
    const reports = others.flatMap((r) => r.#report() ?? []);
    const key = `${req.uriQuery ?? ''}\n${reports.map((r) => `${r.name}:${r.lastMsn}.${r.lastPart}`).join(',')}`;
    const cached = this.#renders.get(key);
    if (cached !== undefined) return cached;
    if (this.#renders.size >= MAX_RENDERS) this.#renders.clear();
    const text = mediaPlaylist({
      segments: this.#segments,
      discontinuitySequence: this.#discontinuitySequence,
      targetDuration: this.#targetDuration(),
      partTargetSecs: this.#partTarget(),
      ended: this.#ended,
      preloadHint: this.#preloadHint(),
      reports,
      uriQuery: req.uriQuery,
    });
    this.#renders.set(key, text);
    return text;
  }

  /** The next part's name: a new segment is predicted once the open one is about full. */
  #preloadHint(): { msn: number; part: number } | undefined {
    const open = this.#openSegment();
    if (open === undefined || this.#segmentFull(open.duration)) return { msn: this.#nextMsn, part: 0 };
    return { msn: open.msn, part: open.parts.length };
  }
}
