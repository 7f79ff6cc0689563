import { randomUUID } from 'node:crypto';
import type { Db } from '../db/index.ts';
import { everyWithoutOverlap, type Repeating } from '../lib/every.ts';
import type { Logger } from '../lib/log.ts';

// The nodes with ingest, in PostgreSQL (live_nodes, migration 503): each registers itself with
// a fresh id when it starts listening, beats every second, and deletes its row when it stops.
// The sessions a node holds are leased to it while its heartbeat is younger than LEASE_MS: a
// node that was killed loses them that long after its last beat, and another node may
// continue them (session-store.ts).

/** A session's holder holds it while its heartbeat is younger than this. */
export const LEASE_MS = 4000;
/** How often a node beats: several beats fit in a lease, so a slow query or two lose nothing. */
export const HEARTBEAT_MS = 1000;
/** A node silent this long died without deleting its row (SIGKILL): its row is deleted. */
const FORGET_AFTER_MS = 10 * 60 * 1000;

/** SQL: the node `node` (a column or parameter holding a live_nodes id) holds its leases now. */
export const leaseHeld = (node: string): string =>
  `EXISTS (SELECT 1 FROM live_nodes n WHERE n.id = ${node} AND n.heartbeat_at > now() - interval '${LEASE_MS} milliseconds')`;

export class NodeRegistry {
  /** This node's id: new at each start, so a restarted node never inherits a dead one's leases. */
  readonly id = randomUUID();
  readonly #db: Db;
  readonly #log: Logger;
  #beats: Repeating | undefined;

  constructor(o: { db: Db; log: Logger }) {
    this.#db = o.db;
    this.#log = o.log;
  }

  /** Registers this node (its internal URL: where the other nodes reach its ladders) and starts beating. */
  async register(internalUrl: string | undefined): Promise<void> {
    await this.#db.query(
      `INSERT INTO live_nodes (id, internal_url, heartbeat_at) VALUES ($1, $2, now())
       ON CONFLICT (id) DO UPDATE SET internal_url = $2, heartbeat_at = now()`,
      [this.id, internalUrl ?? null],
    );
    this.#beats = everyWithoutOverlap(HEARTBEAT_MS, () => this.beat());
  }

  /** One heartbeat (also re-registers a row someone deleted: the node is alive). */
  async beat(): Promise<void> {
    try {
      await this.#db.query(
        `INSERT INTO live_nodes (id, heartbeat_at) VALUES ($1, now())
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()`,
        [this.id],
      );
    } catch (err) {
      this.#log.warn({ err, nodeId: this.id }, 'the live node heartbeat could not be written');
    }
  }

  /**
   * Deletes the rows of nodes that died without deleting them (their leases are long gone: a
   * session of theirs reads the same without the row); how many.
   */
  async forgetDead(): Promise<number> {
    const rows = await this.#db.query<{ id: string }>(
      `DELETE FROM live_nodes WHERE heartbeat_at < now() - interval '${FORGET_AFTER_MS} milliseconds' RETURNING id`,
    );
    return rows.length;
  }

  /** Stops beating and deletes this node's row: its leases end now. */
  async unregister(): Promise<void> {
    await this.#beats?.stop();
    this.#beats = undefined;
    await this.#db.query('DELETE FROM live_nodes WHERE id = $1', [this.id]).catch((err: unknown) => {
      this.#log.warn({ err, nodeId: this.id }, 'the live node could not be unregistered');
    });
  }
}
