import { Writable } from 'node:stream';
import type { Logger } from '../lib/log.ts';
import { ladderCores } from './admission.ts';
import { FlvFormatError, FlvReader, type FlvTagInfo } from './flv-reader.ts';
import type { FlvSink, PublishAttempt } from './ingest-types.ts';
import { type LadderPlan, type LadderTiming, planLiveLadder } from './ladder.ts';
import { LadderProcess } from './ladder-process.ts';
import { LiveRendition, multivariantPlaylist, type VariantInfo } from './llhls/index.ts';
import { type Profile, rungsFor, SOURCE_RENDITION } from './profiles.ts';
import type { SessionRiders } from './session-riders.ts';
import { SessionHealth, SOURCE_MAX_KEYFRAME_GAP_MS, sourceKeyframeIssue } from './session-health.ts';
import type { LiveCounters, LiveLadder, ServedRendition, SessionStore, StreamRecord } from './types.ts';

// One publish: the publisher's FLV in (either ingest), one ladder ffmpeg, its renditions out as
// low-latency HLS. The FLV is read tag by tag before ffmpeg sees it (garbage cuts the publisher
// off, not the ladder), held until the source is known (its first video frame, after onMetaData
// and the sequence headers), then fed to ffmpeg with the publisher's own backpressure. Counters
// go to the store every ~2 s; the end, however it comes, ends the renditions (EXT-X-ENDLIST)
// and marks the stream idle.

export interface LiveSessionOptions {
  stream: StreamRecord;
  sessionId: string;
  attempt: PublishAttempt;
  ffmpegPath: string;
  timing: LadderTiming & { windowSecs: number };
  store: SessionStore;
  log: Logger;
  /** The session's plug-ins on this node (the archive, restreaming). */
  riders?: SessionRiders | undefined;
  /** A ladder ffmpeg started (the metric of ladder processes). */
  onLadderStart(): void;
  /** The ladder's cost in cores, once its source is known or after it dropped a rung. */
  onCost(cores: number): void;
  /** The session is over (its renditions ended, the stream idle). */
  onEnd(): void;
  reportEveryMs?: number;
}

/** FLV held before the source is known: a publisher that sends this much without a video frame is cut off. */
const MAX_HELD_BYTES = 2 * 1024 * 1024;
/** How long a ladder's ffmpeg gets to write out what it holds once its input ends. */
const FINISH_GRACE_MS = 3000;

export class LiveSession implements FlvSink, LiveLadder {
  readonly flv: Writable;
  readonly stream: StreamRecord;
  readonly sessionId: string;
  private readonly o: LiveSessionOptions;
  private readonly reader: FlvReader;
  private readonly health: SessionHealth;
  /** Tags read from the chunk being taken (onTag fills it). */
  private batch: FlvTagInfo[] = [];
  /** Tags held until the ladder starts. */
  private held: Buffer[] = [];
  private heldBytes = 0;
  /** onMetaData and the sequence headers: a restarted ffmpeg is given them first. */
  private readonly configTags = new Map<string, Buffer>();
  private plan: LadderPlan | undefined;
  private process: LadderProcess | undefined;
  private readonly all = new Map<string, LiveRendition>();
  private readonly views = new WeakMap<LiveRendition, ServedRendition>();
  private byFd = new Map<number, LiveRendition>();
  /** After a restart, media waits for the next keyframe (ffmpeg cannot decode from the middle of a GOP). */
  private awaitKeyframe = false;
  private over = false;
  private readonly timer: NodeJS.Timeout;

  constructor(o: LiveSessionOptions) {
    this.o = o;
    this.stream = o.stream;
    this.sessionId = o.sessionId;
    this.reader = new FlvReader({ onTag: (t) => this.batch.push(t) });
    this.health = new SessionHealth({ segmentSecs: o.timing.segmentSecs });
    this.flv = new Writable({
      write: (chunk: Buffer, _enc, done) => this.take(chunk, done),
      highWaterMark: 256 * 1024,
    });
    // The listener ends the stream when the publisher goes; what happens then is `ended`'s.
    this.flv.on('error', () => {});
    this.timer = setInterval(() => void this.tick(), o.reportEveryMs ?? 2000);
    this.timer.unref();
  }

  // --- FlvSink

  ended(kind: 'left' | 'cut' | 'refused', reason: string): void {
    if (kind === 'refused') this.health.event(reason);
    const log = kind === 'left' ? this.o.log.info.bind(this.o.log) : this.o.log.warn.bind(this.o.log);
    log(
      { streamId: this.stream.id, sessionId: this.sessionId, remote: this.o.attempt.remote, kind },
      `publish ended: ${reason}`,
    );
    void this.finish();
  }

  // --- LiveLadder

  multivariant(uriQuery?: string): string | undefined {
    const listed = this.listed();
    if (listed.length === 0 || !listed.every((r) => r.ready)) return undefined;
    const variants = listed.map((r) => this.variantOf(r));
    return multivariantPlaylist(variants, uriQuery);
  }

  rendition(name: string): ServedRendition | undefined {
    const r = this.all.get(name);
    return r && this.served(r);
  }

  renditions(): readonly ServedRendition[] {
    return this.listed().map((r) => this.served(r));
  }

  /**
   * A rendition as the API serves it: its rendition reports (EXT-X-RENDITION-REPORT) name the
   * siblings a player is offered now, whatever the caller passes.
   */
  private served(r: LiveRendition): ServedRendition {
    let view = this.views.get(r);
    if (!view) {
      view = {
        name: r.name,
        get ready() {
          return r.ready;
        },
        playlist: (req) => r.playlist({ ...req, others: this.listed().filter((o) => o !== r) }),
        file: (name, signal) => r.file(name, signal),
      };
      this.views.set(r, view);
    }
    return view;
  }

  /** Cuts the publisher off (terminate, suspend, shutdown); the listener then calls `ended`. */
  cut(reason: string): void {
    this.o.attempt.disconnect(reason);
  }

  /** Shutdown: the publisher cut off, the renditions ended, the stream idle. */
  async close(reason: string): Promise<void> {
    this.cut(reason);
    await this.finish();
  }

  // --- the FLV in

  private take(chunk: Buffer, done: () => void): void {
    if (this.over) {
      done();
      return;
    }
    try {
      this.reader.push(chunk);
    } catch (err) {
      const what = err instanceof FlvFormatError ? err.message : String(err);
      this.fail(`the publisher sent media that cannot be read (${what}); it was disconnected`);
      done();
      return;
    }
    const tags = this.batch;
    this.batch = [];
    for (const t of tags) this.keepConfig(t);
    if (this.process) this.feed(tags, done);
    else this.hold(tags, done);
  }

  private keepConfig(t: FlvTagInfo): void {
    if (t.kind === 'script') this.configTags.set('script', Buffer.from(t.raw));
    else if (t.sequenceHeader) this.configTags.set(t.kind, Buffer.from(t.raw));
  }

  private hold(tags: FlvTagInfo[], done: () => void): void {
    for (const t of tags) {
      this.held.push(t.raw);
      this.heldBytes += t.raw.length;
    }
    if (this.reader.videoFrames > 0) {
      this.startLadder(rungsFor(this.stream.profiles, this.reader.source));
      const held = Buffer.concat(this.held);
      this.held = [];
      this.process?.write(held, done);
      return;
    }
    if (this.heldBytes > MAX_HELD_BYTES)
      this.fail(`no video arrived in the first ${MAX_HELD_BYTES / 1024 / 1024} MB: send H.264 video with the audio`);
    done();
  }

  private feed(tags: FlvTagInfo[], done: () => void): void {
    const raws: Buffer[] = [];
    for (const t of tags) {
      // Audio waits too: a probe of audio alone leaves the copied source without its header.
      if (this.awaitKeyframe && t.kind !== 'script' && !t.sequenceHeader) {
        if (t.kind !== 'video' || !t.keyframe) continue;
        this.awaitKeyframe = false;
      }
      raws.push(t.raw);
    }
    if (raws.length === 0 || !this.process) {
      done();
      return;
    }
    this.process.write(raws.length === 1 && raws[0] ? raws[0] : Buffer.concat(raws), done);
  }

  // --- the ladder

  private startLadder(rungs: readonly Profile[]): void {
    const source = this.reader.source;
    const restart = this.plan !== undefined;
    this.plan = planLiveLadder({ rungs, source, timing: this.o.timing });
    this.o.onCost(ladderCores(rungs, source));
    this.byFd = new Map();
    for (const r of this.plan.renditions) {
      let rendition = this.all.get(r.name);
      if (rendition) rendition.restart();
      else {
        rendition = new LiveRendition({ name: r.name, timing: this.llhlsTiming() });
        this.all.set(r.name, rendition);
        this.o.riders?.rendition(rendition);
      }
      this.byFd.set(r.fd, rendition);
    }
    const byFd = this.byFd;
    // A killed ladder's last bytes may still come out of its pipes: only the current one's count.
    const ladder: LadderProcess = new LadderProcess({
      ffmpegPath: this.o.ffmpegPath,
      args: this.plan.args,
      fds: this.plan.renditions.map((r) => r.fd),
      onOutput: (fd, chunk) => {
        if (this.process === ladder) byFd.get(fd)?.write(chunk);
      },
      onExit: (e) => this.ladderExited(ladder, e),
    });
    this.process = ladder;
    this.health.ladderStarted();
    this.o.onLadderStart();
    this.o.log.info(
      {
        streamId: this.stream.id,
        sessionId: this.sessionId,
        renditions: this.plan.renditions.map((r) => r.name),
        source,
        restart,
      },
      restart ? 'ladder restarted' : 'ladder started',
    );
    if (restart) this.replayConfig();
  }

  /** A restarted ffmpeg reads a new FLV: the header, onMetaData, the sequence headers, then the next keyframe. */
  private replayConfig(): void {
    const head = [this.reader.headerBytes, ...this.configTags.values()].filter((b): b is Buffer => b !== undefined);
    this.awaitKeyframe = true;
    this.process?.write(Buffer.concat(head), () => {});
  }

  private llhlsTiming(): { partTargetSecs: number; segmentTargetSecs: number; windowSecs: number } {
    const t = this.o.timing;
    return { partTargetSecs: t.partSecs, segmentTargetSecs: t.segmentSecs, windowSecs: t.windowSecs };
  }

  private ladderExited(
    ladder: LadderProcess,
    e: { code: number | null; signal: NodeJS.Signals | null; stderrTail: string },
  ): void {
    if (ladder !== this.process || this.over || this.finishing) return;
    const last = e.stderrTail.trim().split('\n').at(-1) ?? '';
    const how = e.signal ? `signal ${e.signal}` : `exit ${e.code}`;
    this.o.log.error(
      { streamId: this.stream.id, sessionId: this.sessionId, stderr: e.stderrTail },
      `the ladder stopped (${how})`,
    );
    this.fail(
      `the live transcoder stopped (${how}${last ? `: ${last.slice(0, 200)}` : ''}); the publisher was disconnected`,
    );
  }

  /** Restarts the ladder without its top rung (the slow ladder's way back to real time). */
  private dropTopRung(): void {
    const rungs = this.plan?.renditions.flatMap((r) => (r.profile ? [r.profile] : [])) ?? [];
    const top = rungs.reduce<Profile | undefined>(
      (a, r) => (!a || r.width * r.height > a.width * a.height ? r : a),
      undefined,
    );
    if (!top || !this.process) return;
    this.health.event(`the ladder fell behind real time: ${top.name} was dropped to keep up (the node's CPU is short)`);
    this.o.log.warn(
      { streamId: this.stream.id, sessionId: this.sessionId, dropped: top.name },
      'ladder behind real time, top rung dropped',
    );
    const old = this.process;
    this.process = undefined;
    old.kill();
    this.all.get(top.name)?.end();
    this.all.delete(top.name);
    this.startLadder(rungs.filter((r) => r !== top));
  }

  // --- what the stream shows

  /** The renditions a player is offered: the rungs, and the source when its keyframes allow. */
  private listed(): LiveRendition[] {
    const names = this.plan?.renditions.map((r) => r.name) ?? [];
    const onlySource = names.length === 1;
    return names
      .filter((n) => n !== SOURCE_RENDITION || onlySource || this.sourceListable())
      .flatMap((n) => this.all.get(n) ?? []);
  }

  /** RFC 8216bis 4.4.3.8: a segment may not exceed the target duration; the source's cannot be cut shorter than its GOP. */
  private sourceListable(): boolean {
    return (this.reader.maxKeyframeGapMs ?? 0) <= SOURCE_MAX_KEYFRAME_GAP_MS;
  }

  private variantOf(r: LiveRendition): VariantInfo {
    const planned = this.plan?.renditions.find((p) => p.name === r.name);
    const stats = r.stats();
    const width = stats.width ?? planned?.width;
    const height = stats.height ?? planned?.height;
    return {
      name: r.name,
      bandwidth: planned?.bandwidth ?? 1_000_000,
      ...(width !== undefined && height !== undefined ? { width, height } : {}),
      ...(stats.codecs ? { codecs: stats.codecs } : {}),
      ...(planned?.frameRate ? { frameRate: planned.frameRate } : {}),
    };
  }

  private counters(): LiveCounters {
    const source = this.all.get(SOURCE_RENDITION)?.stats();
    const rungs = [...this.all.values()].filter((r) => r.name !== SOURCE_RENDITION).map((r) => r.stats());
    const sum = (f: (s: ReturnType<LiveRendition['stats']>) => number): number => rungs.reduce((a, s) => a + f(s), 0);
    const out = (source?.bytes ?? 0) + sum((s) => s.bytes);
    const sourceIssue = this.plan?.renditions.some((r) => r.name === SOURCE_RENDITION) && !this.sourceListable();
    return this.health.counters({
      now: Date.now(),
      ingestRate: this.reader.bytesPerSecond(),
      declaredKbps: this.reader.source.declaredKbps,
      outBytes: out,
      ...(sourceIssue ? { sourceIssue: sourceKeyframeIssue(this.reader.maxKeyframeGapMs ?? 0) } : {}),
      source: { segments: source?.segments ?? 0, secs: source?.segmentsSecs ?? 0, bytes: source?.bytes ?? 0 },
      transcoded: { segments: sum((s) => s.segments), secs: sum((s) => s.segmentsSecs), bytes: sum((s) => s.bytes) },
    });
  }

  private async tick(): Promise<void> {
    if (this.over) return;
    const encoded = [...this.byFd.values()].filter((r) => r.name !== SOURCE_RENDITION || this.byFd.size === 1);
    const mediaSecs = Math.min(...encoded.map((r) => r.stats().mediaSecs));
    const verdict = this.health.observe({
      now: Date.now(),
      inputSecs: this.reader.mediaMs / 1000,
      outputSecs: mediaSecs,
      blocked: this.process?.blocked ?? false,
    });
    if (verdict === 'drop-top-rung' && (this.plan?.renditions.filter((r) => r.profile).length ?? 0) > 1)
      this.dropTopRung();
    await this.o.store.report(this.stream.id, this.counters()).catch((err: unknown) => {
      this.o.log.warn({ err, streamId: this.stream.id }, 'the counters could not be written');
    });
  }

  // --- the end

  /** Something went wrong that ends the publish: an `issues` entry, and the publisher cut off. */
  private fail(issue: string): void {
    if (this.over) return;
    this.health.event(issue);
    this.o.log.warn({ streamId: this.stream.id, sessionId: this.sessionId, remote: this.o.attempt.remote }, issue);
    this.cut(issue);
  }

  private finishing: Promise<void> | undefined;

  private finish(): Promise<void> {
    this.finishing ??= this.finishOnce();
    return this.finishing;
  }

  private async finishOnce(): Promise<void> {
    clearInterval(this.timer);
    this.o.riders?.publishEnded();
    // Let the ladder write out its last parts before the playlists end.
    if (this.process) await this.process.finish(FINISH_GRACE_MS);
    this.over = true;
    for (const r of this.all.values()) r.end();
    await this.o.riders?.end();
    try {
      await this.o.store.report(this.stream.id, this.counters());
      await this.o.store.idle(this.stream.id, this.sessionId);
    } catch (err) {
      this.o.log.error({ err, streamId: this.stream.id }, 'the end of a publish could not be written');
    }
    this.o.onEnd();
  }
}
