import type { Logger } from '../lib/log.ts';
import { ladderCores } from './admission.ts';
import type { FlvSink, PublishAttempt } from './ingest-types.ts';
import { type LadderPlan, type LadderTiming, planLiveLadder } from './ladder.ts';
import { LadderProcess } from './ladder-process.ts';
import { LadderView } from './ladder-view.ts';
import { LiveRendition } from './llhls/index.ts';
import { type Profile, rungsFor, SOURCE_RENDITION } from './profiles.ts';
import { type InputOwner, PublishInput } from './publish-input.ts';
import type { SessionRiders } from './session-riders.ts';
import { SessionHealth, SOURCE_MAX_KEYFRAME_GAP_MS, sourceKeyframeIssue } from './session-health.ts';
import type { LiveCounters, LiveLadder, ServedRendition, SessionKey, SessionRecord } from './types.ts';
import type { SessionStore, StreamRecord } from './types.ts';

// One live session on this node: its publisher's FLV in (publish-input.ts; a publisher that
// comes back within the reconnect window gets a new input), one ladder ffmpeg per publish,
// its renditions out as low-latency HLS. The renditions outlive a publisher that went: a
// reconnect restarts the ladder (every rendition begins a new run: one EXT-X-DISCONTINUITY,
// RFC 8216bis 4.4.4.3), the window's end (or a terminate) ends them (EXT-X-ENDLIST). Counters
// go to the store every ~2 s while a publisher sends.

export interface LiveSessionOptions {
  stream: StreamRecord;
  sessionId: string;
  /** The node holding the session (its lease); the store's compare-and-sets check it. */
  nodeId?: string | undefined;
  attempt: PublishAttempt;
  ffmpegPath: string;
  timing: LadderTiming & { windowSecs: number };
  /** How long the session waits for its publisher to come back (s); 0: it ends with the publish. */
  reconnectSecs?: number | undefined;
  store: SessionStore;
  log: Logger;
  /** The session's plug-ins on this node (the archive, restreaming). */
  riders?: SessionRiders | undefined;
  /** A ladder ffmpeg started (the metric of ladder processes). */
  onLadderStart(): void;
  /** The ladder's cost in cores, once its source is known or after it dropped a rung. */
  onCost(cores: number): void;
  /** The publisher went and its ladder stopped (its cores are free); the session may wait for it. */
  onPublishEnd?(): void;
  /**
   * The session is over on this node: `ended` is the session as this node ended it; undefined
   * when it was continued on another node (or had ended already), and the renditions were
   * left as they were.
   */
  onEnd(ended?: SessionRecord): void;
  reportEveryMs?: number;
}

/** How long a ladder's ffmpeg gets to write out what it holds once its input ends. */
const FINISH_GRACE_MS = 3000;

export class LiveSession implements FlvSink, LiveLadder, InputOwner {
  readonly stream: StreamRecord;
  readonly sessionId: string;
  private readonly o: LiveSessionOptions;
  private readonly key: SessionKey;
  private readonly health: SessionHealth;
  private input: PublishInput;
  private plan: LadderPlan | undefined;
  private process: LadderProcess | undefined;
  private readonly all = new Map<string, LiveRendition>();
  private readonly view: LadderView;
  private byFd = new Map<number, LiveRendition>();
  private over = false;
  private readonly timer: NodeJS.Timeout;
  private windowTimer: NodeJS.Timeout | undefined;
  /** The writes of the last publisher's end (the node waits for them before a reconnect's claim). */
  private gone: Promise<void> = Promise.resolve();
  private ending: Promise<void> | undefined;

  constructor(o: LiveSessionOptions) {
    this.o = o;
    this.stream = o.stream;
    this.sessionId = o.sessionId;
    this.key = { streamId: o.stream.id, sessionId: o.sessionId, nodeId: o.nodeId ?? '' };
    this.health = new SessionHealth({ segmentSecs: o.timing.segmentSecs });
    this.input = new PublishInput({ attempt: o.attempt, owner: this });
    this.view = new LadderView({
      all: this.all,
      plan: () => this.plan,
      sourceListable: () => this.sourceListable(),
    });
    this.timer = setInterval(() => void this.tick(), o.reportEveryMs ?? 2000);
    this.timer.unref();
  }

  // --- the publisher (FlvSink: the current one's)

  get flv(): FlvSink['flv'] {
    return this.input.flv;
  }

  ended(kind: 'left' | 'cut' | 'refused', reason: string): void {
    this.input.ended(kind, reason);
  }

  /** The current publisher's sink (the listener writes it). */
  get sink(): FlvSink {
    return this.input;
  }

  /** A publisher sends now (none while the session waits for it to come back). */
  get publishing(): boolean {
    return !this.input.closed && !this.over;
  }

  /** Resolves once the last publisher's end is written (a reconnect is claimed after it). */
  settled(): Promise<void> {
    return this.gone;
  }

  /** A publisher came back within the window: a new input, the same renditions (the ladder restarts on its first frame). */
  attach(attempt: PublishAttempt): FlvSink {
    clearTimeout(this.windowTimer);
    this.input = new PublishInput({ attempt, owner: this });
    this.o.log.info(
      { streamId: this.stream.id, sessionId: this.sessionId },
      'the publisher is back: session continued',
    );
    return this.input;
  }

  /** Cuts the publisher off (terminate, suspend, delete): the session ends now, without a window. */
  cut(reason: string): void {
    if (this.publishing) this.input.cut(reason, { forced: true });
    else void this.endHere(['live', 'waiting']);
  }

  /** Shutdown: the publisher cut off, the session ended, the stream idle. */
  async close(reason: string): Promise<void> {
    if (this.publishing) {
      this.input.cut(reason, { forced: true });
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    await this.gone;
    await this.endHere(['live', 'waiting']);
  }

  // --- InputOwner

  sourceKnown(input: PublishInput, held: Buffer, done: () => void): void {
    if (input !== this.input || this.over) {
      done();
      return;
    }
    this.startLadder(rungsFor(this.stream.profiles, input.reader.source)).write(held, done);
  }

  media(input: PublishInput, flv: Buffer, done: () => void): void {
    if (!this.process || input !== this.input) done();
    else this.process.write(flv, done);
  }

  /** A lasting issue of something riding along the session (its plug-ins): an `issues` entry. */
  issue(text: string): void {
    this.health.event(text);
  }

  /** Something went wrong that ends the publish: an `issues` entry, and the publisher cut off. */
  inputFailed(input: PublishInput, issue: string): void {
    if (input !== this.input || !this.publishing) return;
    this.health.event(issue);
    this.o.log.warn({ ...this.ids(), remote: input.attempt.remote }, issue);
    input.cut(issue);
  }

  inputEnded(input: PublishInput, kind: 'left' | 'cut' | 'refused', reason: string): void {
    if (kind === 'refused') this.health.event(reason);
    const log = kind === 'left' ? this.o.log.info.bind(this.o.log) : this.o.log.warn.bind(this.o.log);
    log({ ...this.ids(), remote: input.attempt.remote, kind }, `publish ended: ${reason}`);
    if (input !== this.input || this.over) return;
    this.gone = this.publisherGone(input);
  }

  // --- LiveLadder (ladder-view.ts)

  multivariant(uriQuery?: string): string | undefined {
    return this.view.multivariant(uriQuery);
  }

  rendition(name: string): ServedRendition | undefined {
    return this.view.rendition(name);
  }

  renditions(): readonly ServedRendition[] {
    return this.view.renditions();
  }

  // --- the ladder

  private startLadder(rungs: readonly Profile[]): LadderProcess {
    const source = this.input.reader.source;
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
    return ladder;
  }

  private llhlsTiming(): { partTargetSecs: number; segmentTargetSecs: number; windowSecs: number } {
    const t = this.o.timing;
    return { partTargetSecs: t.partSecs, segmentTargetSecs: t.segmentSecs, windowSecs: t.windowSecs };
  }

  private ladderExited(
    ladder: LadderProcess,
    e: { code: number | null; signal: NodeJS.Signals | null; stderrTail: string },
  ): void {
    if (ladder !== this.process || !this.publishing) return;
    const last = e.stderrTail.trim().split('\n').at(-1) ?? '';
    const how = e.signal ? `signal ${e.signal}` : `exit ${e.code}`;
    this.o.log.error(
      { streamId: this.stream.id, sessionId: this.sessionId, stderr: e.stderrTail },
      `the ladder stopped (${how})`,
    );
    this.inputFailed(
      this.input,
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
    this.startLadder(rungs.filter((r) => r !== top)).write(this.input.restartHead(), () => {});
  }

  // --- what the stream shows

  /** RFC 8216bis 4.4.3.8: a segment may not exceed the target duration; the source's cannot be cut shorter than its GOP. */
  private sourceListable(): boolean {
    return (this.input.reader.maxKeyframeGapMs ?? 0) <= SOURCE_MAX_KEYFRAME_GAP_MS;
  }

  private counters(): LiveCounters {
    const source = this.all.get(SOURCE_RENDITION)?.stats();
    const rungs = [...this.all.values()].filter((r) => r.name !== SOURCE_RENDITION).map((r) => r.stats());
    const sum = (f: (s: ReturnType<LiveRendition['stats']>) => number): number => rungs.reduce((a, s) => a + f(s), 0);
    const out = (source?.bytes ?? 0) + sum((s) => s.bytes);
    const sourceIssue = this.plan?.renditions.some((r) => r.name === SOURCE_RENDITION) && !this.sourceListable();
    return this.health.counters({
      now: Date.now(),
      ingestRate: this.input.reader.bytesPerSecond(),
      declaredKbps: this.input.reader.source.declaredKbps,
      outBytes: out,
      ...(sourceIssue ? { sourceIssue: sourceKeyframeIssue(this.input.reader.maxKeyframeGapMs ?? 0) } : {}),
      source: { segments: source?.segments ?? 0, secs: source?.segmentsSecs ?? 0, bytes: source?.bytes ?? 0 },
      transcoded: { segments: sum((s) => s.segments), secs: sum((s) => s.segmentsSecs), bytes: sum((s) => s.bytes) },
    });
  }

  private async tick(): Promise<void> {
    if (!this.publishing || !this.process) return;
    const encoded = [...this.byFd.values()].filter((r) => r.name !== SOURCE_RENDITION || this.byFd.size === 1);
    const mediaSecs = Math.min(...encoded.map((r) => r.stats().mediaSecs));
    const verdict = this.health.observe({
      now: Date.now(),
      inputSecs: this.input.reader.mediaMs / 1000,
      outputSecs: mediaSecs,
      blocked: this.process?.blocked ?? false,
    });
    if (verdict === 'drop-top-rung' && (this.plan?.renditions.filter((r) => r.profile).length ?? 0) > 1)
      this.dropTopRung();
    await this.o.store.report(this.key, this.counters()).catch((err: unknown) => {
      this.o.log.warn({ err, streamId: this.stream.id }, 'the counters could not be written');
    });
  }

  // --- the end

  private ids(): { streamId: string; sessionId: string } {
    return { streamId: this.stream.id, sessionId: this.sessionId };
  }

  /**
   * The publisher went: its ladder writes out its last parts (the renditions stay, without
   * EXT-X-ENDLIST), the stream is idle and the session waits for the publisher within the
   * window; a cut by the service, or no window, ends it now.
   */
  private async publisherGone(input: PublishInput): Promise<void> {
    this.o.riders?.publishEnded();
    const ladder = this.process;
    if (ladder) await ladder.finish(FINISH_GRACE_MS);
    if (this.process === ladder) this.process = undefined;
    this.o.onPublishEnd?.();
    try {
      await this.o.store.report(this.key, this.counters());
      await this.o.store.idle(this.key);
    } catch (err) {
      this.o.log.error({ err, ...this.ids() }, 'the end of a publish could not be written');
    }
    const window = this.o.reconnectSecs ?? 0;
    if (input.forced || window <= 0) {
      void this.endHere(['live', 'waiting']);
      return;
    }
    if (input !== this.input) return;
    this.windowTimer = setTimeout(() => void this.windowClosed(), window * 1000);
    this.windowTimer.unref();
  }

  /** The window closed without the publisher: the session ends, unless another node continued it. */
  private async windowClosed(): Promise<void> {
    if (this.publishing || this.over) return;
    const ended = await this.o.store.end(this.key, ['waiting']).catch((err: unknown) => {
      this.o.log.error({ err, ...this.ids() }, 'the end of a session could not be written');
      return undefined;
    });
    if (this.publishing || this.over) return;
    if (ended) await this.finish(ended);
    else await this.dropCopy();
  }

  /** Another node continued the session: this copy goes quietly (no end, no events). */
  async dropCopy(): Promise<void> {
    if (this.publishing || this.over) return;
    this.o.log.info(this.ids(), 'the session went on elsewhere: its copy here is dropped');
    await this.finish(undefined);
  }

  /** Ends the session now (a compare-and-set on the states `from`), its renditions and plug-ins with it. */
  private endHere(from: readonly SessionRecord['state'][]): Promise<void> {
    this.ending ??= (async () => {
      clearTimeout(this.windowTimer);
      await this.gone;
      const ended = await this.o.store.end(this.key, from).catch((err: unknown) => {
        this.o.log.error({ err, ...this.ids() }, 'the end of a session could not be written');
        return undefined;
      });
      await this.finish(ended, { endRenditions: true });
    })();
    return this.ending;
  }

  private async finish(ended: SessionRecord | undefined, o: { endRenditions?: boolean } = {}): Promise<void> {
    if (this.over) return;
    this.over = true;
    clearInterval(this.timer);
    clearTimeout(this.windowTimer);
    this.process?.kill();
    if (ended || o.endRenditions) for (const r of this.all.values()) r.end();
    await this.o.riders?.end();
    this.o.onEnd(ended);
  }
}
