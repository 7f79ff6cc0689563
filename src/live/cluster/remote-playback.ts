import { Counter, type Registry } from 'prom-client';
import type { LiveLadder } from '../types.ts';
import type { HolderLookup } from './holders.ts';
import { internalBase, RemoteLadder } from './remote-ladder.ts';
import { Upstream } from './upstream.ts';

// The streams live on other nodes of the cluster, as any API node reaches them: their ladders,
// served to this node's viewers through one shared Upstream (its requests counted on /metrics
// as mediaplane_live_upstream_requests_total), and the cut of their publishers (a terminate,
// suspend or delete asked of this node). The holder is found through the holder lookup.

/** What /media/live/ asks when the ladder is not live on this node. */
export interface RemoteLadders {
  /** The ladder of a playbackId live on another node; undefined when no live node holds it. */
  ladder(playbackId: string): Promise<LiveLadder | undefined>;
}

/** What the stream routes ask when a stream's publisher is not on this node. */
export interface RemoteCut {
  /** Cuts the publisher off on the node holding the stream; false when no live node holds it. */
  terminate(o: { streamId: string; playbackId: string; reason: string }): Promise<boolean>;
}

export interface RemotePlaybackOptions {
  holders: HolderLookup;
  /** The cluster's shared secret (MEDIAPLANE_CLUSTER_SECRET). */
  secret: string;
  metrics?: Registry | undefined;
  /** Bytes of fetched files kept for other viewers (default 64 MB). */
  cacheBytes?: number;
}

export class RemotePlayback implements RemoteLadders, RemoteCut {
  readonly #holders: HolderLookup;
  readonly #secret: string;
  readonly #upstream: Upstream;
  /** Requests sent to other nodes (also on /metrics). */
  upstreamRequests = 0;

  constructor(o: RemotePlaybackOptions) {
    this.#holders = o.holders;
    this.#secret = o.secret;
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

  async terminate(o: { streamId: string; playbackId: string; reason: string }): Promise<boolean> {
    const holderUrl = await this.#holders.holder(o.playbackId);
    if (holderUrl === undefined) return false;
    const res = await fetch(`${internalBase(holderUrl, o.playbackId)}/terminate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.#secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ streamId: o.streamId, reason: o.reason }),
      signal: AbortSignal.timeout(10_000),
    }).catch(() => undefined);
    await res?.arrayBuffer();
    return res?.status === 204;
  }
}
