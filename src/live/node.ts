import { randomUUID } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { Counter, type Registry } from 'prom-client';
import type { KeyLimits } from '../accounts/index.ts';
import type { Config } from '../config/index.ts';
import { TooManyRequestsError } from '../lib/errors.ts';
import type { Logger } from '../lib/log.ts';
import { ladderCores, LiveAdmission } from './admission.ts';
import type {
  FlvSink,
  IngestListener,
  IngestProtocol,
  PublishAttempt,
  PublishDecision,
  PublishGate,
  PublishRefusal,
} from './ingest-types.ts';
import { rungsFor } from './profiles.ts';
import { startRtmpServer } from './rtmp/index.ts';
import { LiveSession } from './session.ts';
import type { SessionPluginFactory } from './session-plugins.ts';
import { SessionRiders } from './session-riders.ts';
import { startSrtRelay } from './srt/index.ts';
import type { SessionClaim } from './session-store.ts';
import type {
  LiveLadder,
  LivePlayback,
  RecordingQueue,
  SessionKey,
  SessionRecord,
  SessionStore,
  StreamRecord,
} from './types.ts';

// The live runtime of one node: the gate every publisher passes (key, suspension, already
// live, CPU and stream count, the key's request rate), the sessions live here by stream and
// playback id, and the listeners. Nothing starts for a publisher before the gate admits it.

/** What the runtime reads and writes of streams and sessions (LiveSessionStore in session-store.ts has these). */
export interface LiveNodeStore extends SessionStore {
  findByKey(streamKey: string): Promise<StreamRecord | undefined>;
  claim(
    c: SessionKey & { protocol: IngestProtocol; windowSecs: number; publisherGone?: boolean },
  ): Promise<SessionClaim>;
  /** The recording of an ended session was handed to the RecordingQueue. */
  recordingQueued?(sessionId: string): Promise<void>;
  /** Of the sessions waiting here, those a publisher continued on another node (or that ended). */
  continuedElsewhere?(sessionIds: readonly string[], nodeId: string): Promise<string[]>;
}

/** This node in the registry of nodes (NodeRegistry in node-registry.ts): the leases of its sessions. */
export interface LiveNodeRegistry {
  readonly id: string;
  register(internalUrl: string | undefined): Promise<void>;
  unregister(): Promise<void>;
}

export type LiveNodeConfig = Pick<
  Config,
  | 'ffmpegPath'
  | 'host'
  | 'ingestHost'
  | 'rtmpPort'
  | 'srtPort'
  | 'liveMaxStreams'
  | 'liveCpuCapacity'
  | 'liveSegmentSecs'
  | 'livePartSecs'
  | 'liveWindowSecs'
  | 'liveIdleTimeoutMs'
  | 'liveReconnectSecs'
>;

/** What the gate needs of accounts (Accounts has it): a publish is one request of the stream's key. */
export interface PublishCounting {
  limiter?:
    | {
        count(k: { keyId: string; owner: string }): void;
        /** Throws (RateLimitedError) when the key's requests in this window are used up. */
        admit(k: { keyId: string; owner: string; limits: KeyLimits }): Promise<unknown>;
      }
    | undefined;
  keyView(owner: string, id: string): Promise<{ limits: KeyLimits | undefined }>;
}

export interface LiveNodeOptions {
  config: LiveNodeConfig;
  log: Logger;
  store: LiveNodeStore;
  /** A publish counts as one request of the key that made the stream (its rpm), never as a transcode. */
  accounts: PublishCounting;
  metrics?: Registry;
  /** What rides along each session here (the archive, restreaming): made at its start or continuation. */
  plugins?: SessionPluginFactory[] | undefined;
  /** Makes the recording of an ended session with `record`. */
  recordings?: RecordingQueue | undefined;
  /** Where this node's sessions are leased (absent: a node of its own, as in tests without a database). */
  registry?: LiveNodeRegistry | undefined;
  /** The sweep of dead nodes' sessions and of unqueued recordings (SessionSweep): runs while the node listens. */
  sweep?: { start(): void; stop(): Promise<void>; alsoEachPass?(job: () => Promise<void>): void } | undefined;
}

export class LiveNode implements LivePlayback {
  private readonly o: LiveNodeOptions;
  private readonly log: Logger;
  private readonly admission: LiveAdmission;
  private readonly byStream = new Map<string, LiveSession>();
  private readonly byPlayback = new Map<string, LiveSession>();
  /** The admission id of each session's current publish. */
  private readonly publishes = new Map<LiveSession, string>();
  private readonly registryId: string;
  private readonly laddersStarted: Counter | undefined;
  private readonly refusals: Counter | undefined;
  private listeners: IngestListener[] = [];
  private closing = false;
  /** Ladder processes started (also on /metrics): refused publishes start none. */
  ladderStarts = 0;

  constructor(o: LiveNodeOptions) {
    this.o = o;
    this.log = o.log.child({ role: 'live' });
    this.registryId = o.registry?.id ?? randomUUID();
    const cores = o.config.liveCpuCapacity > 0 ? o.config.liveCpuCapacity : availableParallelism();
    this.admission = new LiveAdmission({ capacity: cores, maxStreams: o.config.liveMaxStreams });
    this.laddersStarted =
      o.metrics &&
      new Counter({
        name: 'mediaplane_live_ladders_started_total',
        help: 'Live ladder ffmpeg processes started (one per admitted publish, one more per restart without a rung)',
        registers: [o.metrics],
      });
    this.refusals =
      o.metrics &&
      new Counter({
        name: 'mediaplane_live_publishes_refused_total',
        help: 'Publishes refused by the gate (no such key, suspended, already live, no capacity, over the rate)',
        registers: [o.metrics],
      });
  }

  /** The gate the listeners call; refusals say why in words for the person at the encoder. */
  readonly gate: PublishGate = async (attempt) => {
    try {
      const decision = await this.decide(attempt);
      if (!decision.accepted) {
        this.refusals?.inc();
        this.log.info(
          { protocol: attempt.protocol, remote: attempt.remote, code: decision.code },
          `publish refused: ${decision.description}`,
        );
      }
      return decision;
    } catch (err) {
      this.log.error({ err, remote: attempt.remote }, 'the publish could not be checked');
      return refuse('Rejected', 'the service cannot take a publish right now: try again in a moment');
    }
  };

  private async decide(attempt: PublishAttempt): Promise<PublishDecision> {
    if (this.closing) return refuse('Rejected', 'this node is shutting down: publish again in a moment');
    const stream = await this.o.store.findByKey(attempt.streamKey);
    if (!stream)
      return refuse('BadName', 'no stream has this stream key: copy the key from the stream in the console or the API');
    if (stream.suspended) return refuse('BadName', 'this stream is suspended: its owner can lift the suspension');
    if (this.byStream.get(stream.id)?.publishing) return ALREADY_LIVE;
    // The admission counts this publish's ladder (a session waiting for its publisher runs none).
    const publishId = randomUUID();
    const admitted = this.admission.admit(publishId, ladderCores(rungsFor(stream.profiles, {})));
    if (!admitted.admitted) return refuse('Rejected', admitted.reason);
    const refusal = await this.overRate(stream);
    const decision = refusal ?? (await this.open(stream, publishId, attempt));
    if (!decision.accepted) this.admission.release(publishId);
    return decision;
  }

  /** The key that made the stream counts the publish as a request; a refusal when its window is spent. */
  private async overRate(stream: StreamRecord): Promise<PublishRefusal | undefined> {
    const limiter = this.o.accounts.limiter;
    if (!limiter || !stream.keyId) return undefined;
    const view = await this.o.accounts.keyView(stream.owner, stream.keyId).catch(() => undefined);
    const keyed = { keyId: stream.keyId, owner: stream.owner };
    if (view?.limits?.requestsPerMinute == null && view?.limits?.tokensPerMinute == null) {
      limiter.count(keyed);
      return undefined;
    }
    try {
      await limiter.admit({ ...keyed, limits: view.limits });
      return undefined;
    } catch (err) {
      // Anything else (the database) is the gate's failure, not the key's.
      if (!(err instanceof TooManyRequestsError)) throw err;
      return refuse('Rejected', `the API key that made this stream is over its request rate (${err.message})`);
    }
  }

  /**
   * Claims the stream's session (store.claim: one publisher wins; a session whose publisher
   * left within the window is continued) and attaches the publisher: to the session still
   * here, or to a new LiveSession (a new session, or one continued from another node).
   */
  private async open(stream: StreamRecord, publishId: string, attempt: PublishAttempt): Promise<PublishDecision> {
    const here = this.byStream.get(stream.id);
    if (here) await here.settled();
    const claim = await this.o.store.claim({
      streamId: stream.id,
      sessionId: randomUUID(),
      nodeId: this.nodeId,
      protocol: attempt.protocol,
      windowSecs: this.o.config.liveReconnectSecs,
      publisherGone: here !== undefined && !here.publishing,
    });
    if (!claim.claimed)
      return claim.why === 'live' ? ALREADY_LIVE : refuse('BadName', 'this stream is suspended or was deleted');
    const local = this.byStream.get(stream.id);
    if (local?.publishing) return ALREADY_LIVE;
    let sink: FlvSink;
    if (local && local.sessionId === claim.session.id) sink = local.attach(attempt);
    else {
      // A session here whose window closed while the new publisher was claimed: it is over.
      local?.cut('the session ended');
      sink = this.openSession(stream, claim, attempt).sink;
    }
    const session = this.byStream.get(stream.id);
    if (session) this.publishes.set(session, publishId);
    this.log.info(
      {
        streamId: stream.id,
        sessionId: claim.session.id,
        continued: claim.continued,
        protocol: attempt.protocol,
        remote: attempt.remote,
      },
      'publish accepted',
    );
    return { accepted: true, sink };
  }

  private openSession(
    stream: StreamRecord,
    claim: Extract<SessionClaim, { claimed: true }>,
    attempt: PublishAttempt,
  ): LiveSession {
    const c = this.o.config;
    const sessionId = claim.session.id;
    const view = {
      stream,
      sessionId,
      continued: claim.continued,
      log: this.log,
      issue: (text: string) => session.issue(text),
    };
    const session: LiveSession = new LiveSession({
      stream,
      sessionId,
      nodeId: this.nodeId,
      attempt,
      ffmpegPath: c.ffmpegPath,
      timing: { segmentSecs: c.liveSegmentSecs, partSecs: c.livePartSecs, windowSecs: c.liveWindowSecs },
      reconnectSecs: c.liveReconnectSecs,
      store: this.o.store,
      log: this.log,
      riders: new SessionRiders(this.o.plugins ?? [], view),
      onLadderStart: () => {
        this.ladderStarts++;
        this.laddersStarted?.inc();
      },
      onCost: (cores) => this.admission.update(this.publishes.get(session) ?? '', cores),
      onPublishEnd: () => this.publishEnded(session),
      onEnd: (ended) => this.sessionEnded(session, ended),
    });
    this.byStream.set(stream.id, session);
    this.byPlayback.set(stream.playbackId, session);
    return session;
  }

  /** The publisher went: its ladder's cores are free (the session may wait for it). */
  private publishEnded(session: LiveSession): void {
    const id = this.publishes.get(session);
    if (id === undefined) return;
    this.admission.release(id);
    this.publishes.delete(session);
  }

  private sessionEnded(session: LiveSession, ended: SessionRecord | undefined): void {
    this.publishEnded(session);
    if (this.byStream.get(session.stream.id) === session) this.byStream.delete(session.stream.id);
    // Its ended playlists (EXT-X-ENDLIST) stay served for a while, so a player that asks after
    // the end learns that the stream ended rather than getting a 404; a new publish replaces
    // them. A session that went on elsewhere is dropped at once (its viewers find it there).
    const drop = () => {
      if (this.byPlayback.get(session.stream.playbackId) === session) this.byPlayback.delete(session.stream.playbackId);
    };
    if (this.closing || ended === undefined) drop();
    else setTimeout(drop, ENDED_SERVED_MS).unref();
    if (ended?.record) void this.queueRecording(ended);
  }

  /** Hands an ended session's recording to the asset pipeline (the sweep retries one that failed). */
  private async queueRecording(ended: SessionRecord): Promise<void> {
    if (!this.o.recordings) return;
    try {
      await this.o.recordings.queue(ended);
      await this.o.store.recordingQueued?.(ended.id);
    } catch (err) {
      this.log.error({ err, streamId: ended.streamId, sessionId: ended.id }, 'the recording could not be queued yet');
    }
  }

  /**
   * Copies here of sessions a publisher continued on another node go at once, rather than at
   * the end of their window: the local ladder is asked first, and its viewers find the session there.
   */
  private async dropCopiesElsewhere(): Promise<void> {
    const waiting = [...this.byStream.values()].filter((s) => !s.publishing);
    if (waiting.length === 0 || !this.o.store.continuedElsewhere) return;
    const gone = new Set(
      await this.o.store.continuedElsewhere(
        waiting.map((s) => s.sessionId),
        this.registryId,
      ),
    );
    for (const s of waiting) if (gone.has(s.sessionId)) await s.dropCopy();
  }

  // --- LivePlayback

  ladder(playbackId: string): LiveLadder | undefined {
    return this.byPlayback.get(playbackId);
  }

  /** Ends the stream's session here now (no reconnect window); whether a publisher was cut off. */
  terminate(streamId: string, reason: string): boolean {
    const session = this.byStream.get(streamId);
    if (!session) return false;
    const publishing = session.publishing;
    session.cut(reason);
    return publishing;
  }

  /** Streams with a publisher on this node now. */
  get live(): number {
    return [...this.byStream.values()].filter((s) => s.publishing).length;
  }

  /** This node's id in the registry (the holder of its sessions' leases). */
  get nodeId(): string {
    return this.registryId;
  }

  // --- listeners

  /**
   * Registers this node (its sessions' leases; `internalUrl`: where the other nodes reach its
   * ladders), then starts RTMP and SRT ingest (each unless its port is 0); the listeners with their ports.
   */
  async listen(o: { internalUrl?: string | undefined } = {}): Promise<IngestListener[]> {
    const c = this.o.config;
    const host = c.ingestHost ?? c.host;
    const common = { host, log: this.log, gate: this.gate, idleTimeoutMs: c.liveIdleTimeoutMs };
    try {
      await this.o.registry?.register(o.internalUrl);
      this.o.sweep?.alsoEachPass?.(() => this.dropCopiesElsewhere());
      this.o.sweep?.start();
      if (c.rtmpPort !== 0) this.listeners.push(await startRtmpServer({ ...common, port: c.rtmpPort }));
      if (c.srtPort !== 0)
        this.listeners.push(await startSrtRelay({ ...common, port: c.srtPort, ffmpegPath: c.ffmpegPath }));
    } catch (err) {
      await this.close();
      throw err;
    }
    for (const l of this.listeners)
      this.log.info({ protocol: l.protocol, host, port: l.port }, `${l.protocol.toUpperCase()} ingest listening`);
    return this.listeners;
  }

  /** Stops taking publishes, cuts every publisher off, ends every rendition and marks the streams idle. */
  async close(): Promise<void> {
    this.closing = true;
    const listeners = this.listeners;
    this.listeners = [];
    const sessions = [...this.byStream.values()];
    await Promise.allSettled([
      ...listeners.map((l) => l.close()),
      ...sessions.map((s) => s.close('the server is shutting down')),
    ]);
    await this.o.sweep?.stop();
    await this.o.registry?.unregister();
  }
}

/** How long an ended session's playlists are still served (players poll every part or segment). */
const ENDED_SERVED_MS = 20_000;

const ALREADY_LIVE: PublishRefusal = refuse('Rejected', 'this stream is already live from another publisher');

function refuse(code: PublishRefusal['code'], description: string): PublishRefusal {
  return { accepted: false, code, description };
}
