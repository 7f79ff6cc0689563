import { Counter, type Registry } from 'prom-client';
import type { Resolve } from '../../lib/net-guard.ts';
import type { RenditionTap, SessionPlugin, SessionPluginFactory, SessionView } from '../session-plugins.ts';
import type { MultistreamTarget } from '../types.ts';
import { type PusherEvent, TargetPusher } from './pusher.ts';
import { guardedTargetUrl } from './target-address.ts';
import type { MultistreamTargetRecord, MultistreamTargetStore, TargetShown } from './target-store.ts';

// Restreaming as a session plug-in (session-plugins.ts): each target the stream names gets a
// pusher tapping the rendition its `profile` names (`source` or a rung), copied, never encoded
// again. The targets are the stream's as they were when the session began on this node; a
// target changed while live takes effect at the next session.

export interface MultistreamPluginDeps {
  targets: Pick<MultistreamTargetStore, 'owned' | 'event'>;
  ffmpegPath: string;
  /** MEDIAPLANE_ALLOW_PRIVATE_URLS: a target on a private address is refused unless allowed. */
  allowPrivateUrls: boolean;
  /** How host names are resolved (a seam for tests); the system's otherwise. */
  resolve?: Resolve | undefined;
  maxQueueSecs?: number | undefined;
  /** /metrics: restream failures and dropped parts. */
  metrics?: Registry | undefined;
}

/** What the pushers count on /metrics. */
interface RestreamMeter {
  failed(): void;
  dropped(count: number): void;
}

function restreamMeter(metrics: Registry | undefined): RestreamMeter {
  if (!metrics) return { failed: () => {}, dropped: () => {} };
  const failures = new Counter({
    name: 'mediaplane_live_restream_failures_total',
    help: 'Restream connections that failed or ended unasked (each is retried with backoff)',
    registers: [metrics],
  });
  const dropped = new Counter({
    name: 'mediaplane_live_restream_dropped_parts_total',
    help: 'Parts a restream target was too slow or away to take (dropped a whole GOP at a time)',
    registers: [metrics],
  });
  return { failed: () => failures.inc(), dropped: (n) => dropped.inc(n) };
}

/** Makes the restreaming of each session whose stream names targets. */
export function multistreamPlugin(deps: MultistreamPluginDeps): SessionPluginFactory {
  const meter = restreamMeter(deps.metrics);
  return (view) => {
    const targets = view.stream.multistream.targets;
    return targets.length === 0 ? undefined : new MultistreamSession(view, targets, { ...deps, meter });
  };
}

type SessionDeps = MultistreamPluginDeps & { meter: RestreamMeter };

interface Pushed {
  target: TargetShown;
  pusher: TargetPusher;
}

type SavedTargets = () => Promise<Map<string, MultistreamTargetRecord>>;

class MultistreamSession implements SessionPlugin {
  readonly #pushed: Pushed[];

  constructor(view: SessionView, targets: readonly MultistreamTarget[], deps: SessionDeps) {
    const ids = targets.flatMap((t) => (t.id === undefined ? [] : [t.id]));
    // Read once per session; a failed read is each pusher's failure, and read again at its retry.
    let saved: Promise<Map<string, MultistreamTargetRecord>> | undefined;
    const savedTargets: SavedTargets = () => {
      saved ??= deps.targets.owned(view.stream.owner, ids).catch((err: unknown) => {
        saved = undefined;
        throw err;
      });
      return saved;
    };
    this.#pushed = targets.map((t, i) => pushed({ view, t, i, deps, savedTargets }));
  }

  rendition(name: string, tap: (t: RenditionTap) => void): void {
    for (const { target, pusher } of this.#pushed) if (target.profile === name) tap(pusher);
  }

  async end(): Promise<void> {
    await Promise.allSettled(this.#pushed.map(({ pusher }) => pusher.stop()));
  }
}

/** The pusher of the stream's `i`th target, whose url is read (a saved target) and guarded before each connection. */
function pushed(o: {
  view: SessionView;
  t: MultistreamTarget;
  i: number;
  deps: SessionDeps;
  savedTargets: SavedTargets;
}): Pushed {
  const { view, t, deps } = o;
  const target: TargetShown = {
    id: t.id ?? `inline-${o.i}`,
    profile: t.profile,
    videoOnly: t.videoOnly ?? false,
    ...(t.spec?.name === undefined ? {} : { name: t.spec.name }),
  };
  const url = async (): Promise<string | undefined> => {
    // A stream kept from before targets were saved may still hold an inline url.
    if (t.id === undefined) return t.spec?.url;
    const record = (await o.savedTargets()).get(t.id);
    if (record?.name !== undefined) target.name ??= record.name;
    return record === undefined || record.disabled ? undefined : record.url;
  };
  const log = view.log.child({ streamId: view.stream.id, sessionId: view.sessionId, targetId: target.id });
  const emit = (e: PusherEvent): void => {
    deps.targets.event(view.stream.id, e, target).catch((err: unknown) => {
      log.error({ err, event: e }, 'a multistream event could not be written');
    });
  };
  const pusher = new TargetPusher({
    ffmpegPath: deps.ffmpegPath,
    videoOnly: target.videoOnly,
    log,
    maxQueueSecs: deps.maxQueueSecs,
    address: async () => {
      const u = await url();
      const guard = { allowPrivate: deps.allowPrivateUrls, resolve: deps.resolve };
      return u === undefined ? undefined : guardedTargetUrl(u, guard);
    },
    onEvent: emit,
    onFailure: deps.meter.failed,
    onDropped: deps.meter.dropped,
  });
  return { target, pusher };
}
