import type { Registry as MetricsRegistry } from 'prom-client';
import { AssetRecordings } from './assets/index.ts';
import type { Core } from './core.ts';
import {
  archivePlugin,
  LiveNode,
  LiveSessionStore,
  MultistreamTargetStore,
  multistreamPlugin,
  NodeRegistry,
  SessionSweep,
} from './live/index.ts';

// The live runtime's wiring (a part of the composition root, main.ts): the store of its
// sessions, what rides along each session, the recordings, the node's leases and the sweep.

/**
 * The live runtime of this process: its publish gate reads streams and counts a publish against
 * the stream's key; its ladders' counter goes on /metrics.
 */
export function createLiveNode(core: Core, metrics?: MetricsRegistry): LiveNode {
  const store = new LiveSessionStore(core.db);
  const nodes = new NodeRegistry({ db: core.db, log: core.log });
  // A recorded session's recording, an asset made by the asset pipeline.
  const recordings = new AssetRecordings(core.assets, { maxQueuedPerOwner: core.config.maxQueuedPerOwner });
  return new LiveNode({
    config: core.config,
    log: core.log,
    store,
    accounts: core.accounts,
    ...(metrics ? { metrics } : {}),
    // Every session's source is archived as it arrives (recordings, live clips).
    plugins: [
      archivePlugin({ store: core.builtinStore, db: core.db, clipSecs: core.config.liveClipSecs }),
      // Each restream target a stream names gets its rendition pushed, copied.
      multistreamPlugin({
        targets: new MultistreamTargetStore(core.db),
        ffmpegPath: core.config.ffmpegPath,
        allowPrivateUrls: core.config.allowPrivateUrls,
        metrics,
      }),
    ],
    recordings,
    // The leases of this node's sessions, and the sweep of the sessions of nodes that died.
    registry: nodes,
    sweep: new SessionSweep({ store, recordings, nodes, windowSecs: core.config.liveReconnectSecs, log: core.log }),
  });
}
