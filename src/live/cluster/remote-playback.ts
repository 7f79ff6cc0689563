import { Counter, type Registry } from 'prom-client';
import type { LiveLadder } from '../types.ts';
import type { HolderLookup } from './holders.ts';
import { RemoteLadder } from './remote-ladder.ts';
import { Upstream } from './upstream.ts';

// The ladders live on other nodes of the cluster, as the viewer's node serves them: found
// through the holder lookup, fetched through one shared Upstream (its requests counted on
// /metrics as mediaplane_live_upstream_requests_total).

/** What /media/live/ asks when the ladder is not live on this node. */
export interface RemoteLadders {
  /** The ladder of a playbackId live on another node; undefined when no live node holds it. */
  ladder(playbackId: string): Promise<LiveLadder | undefined>;
}

export interface RemotePlaybackOptions {
  holders: HolderLookup;
  /** The cluster's shared secret (MEDIAPLANE_CLUSTER_SECRET). */
  secret: string;
  metrics?: Registry | undefined;
  /** Bytes of fetched files kept for other viewers (default 64 MB). */
  cacheBytes?: number;
}

export class RemotePlayback implements RemoteLadders {
  readonly #holders: HolderLookup;
  readonly #upstream: Upstream;
  /** Requests sent to other nodes (also on /metrics). */
  upstreamRequests = 0;

  constructor(o: RemotePlaybackOptions) {
    this.#holders = o.holders;
    const counter =
      o.metrics &&
      new Counter({
        name: 'mediaplane_live_upstream_requests_total',
        help: 'Requests this node sent to the node holding a live stream, for its viewers (one per distinct URL in flight)',
        registers: [o.metrics],
      });
    this.#upstream = new Upstream({
      secret: o.secret,
      ...(o.cacheBytes === undefined ? {} : { cacheBytes: o.cacheBytes }),
      onRequest: () => {
        this.upstreamRequests++;
        counter?.inc();
      },
    });
  }

  async ladder(playbackId: string): Promise<LiveLadder | undefined> {
    const holderUrl = await this.#holders.holder(playbackId);
    return holderUrl === undefined ? undefined : new RemoteLadder({ holderUrl, playbackId, upstream: this.#upstream });
  }
}
