import type { Queryable } from '../../db/index.ts';
import { readAtMostEvery } from '../../lib/recent-reads.ts';
import { leaseHeld } from '../node-registry.ts';

// Where a playbackId is live in the cluster: the internal URL the node holding its stream's
// current session advertises, while that node's lease holds. Nodes find each other through
// PostgreSQL (live_nodes: each node's internal URL and heartbeat); a viewer's node asks here
// before it fetches a ladder from another node.

/** How the holder of a playbackId is found: the internal URL, or undefined when no live node holds it. */
export interface HolderLookup {
  holder(playbackId: string): Promise<string | undefined>;
}

/**
 * The session's holder while it is live or waiting for its publisher (its renditions are still
 * served there, without ENDLIST) and the holder's lease holds (node-registry.ts).
 */
const HOLDER_SQL = `
  SELECT n.internal_url FROM streams s
    JOIN stream_sessions ss ON ss.id = s.session_id
    JOIN live_nodes n ON n.id = ss.node_id
   WHERE s.playback_id = $1 AND ss.state IN ('live', 'waiting') AND n.internal_url IS NOT NULL
     AND ${leaseHeld('ss.node_id')}
   LIMIT 1`;

/**
 * The holders of playbackIds, each read at most once per `readEveryMs` (default 1 s) however
 * many viewers ask: every viewer asks a playlist and a part every part's duration.
 */
export class LiveHolders implements HolderLookup {
  readonly holder: (playbackId: string) => Promise<string | undefined>;

  constructor(o: { db: Queryable; readEveryMs?: number; now?: () => number }) {
    this.holder = readAtMostEvery(
      (playbackId) =>
        o.db.query<{ internal_url: string }>(HOLDER_SQL, [playbackId]).then((rows) => rows[0]?.internal_url),
      { keepMs: o.readEveryMs ?? 1000, now: o.now },
    );
  }
}
