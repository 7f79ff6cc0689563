// The keys' rate windows are fixed and aligned on the epoch (accounts/limit-sql.ts: the window
// starts at now - now % windowMs, by the database's clock_timestamp()). A test that counts
// exactly N requests in one window must not straddle two of them.
//
// freshWindow sleeps until one starts. A test can instead move the database's clock: the
// test-only seam below shadows clock_timestamp() with one in the schema mediaplane_test_clock,
// which sessions reach before pg_catalog's through their search_path, running a shift ahead of the real
// clock. Only the rate windows read clock_timestamp(); now() (days, budgets, leases) keeps
// the real time. No source file knows of it.

import pg from 'pg';
import { sleep } from './sleep.ts';

/** Waits, when needed, until the current `windowMs` window has at least `needMs` left. */
export async function freshWindow(windowMs: number, needMs: number): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < needMs) await sleep(left + 50);
}

const SCHEMA = 'mediaplane_test_clock';

const INSTALL = [
  `CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`,
  `CREATE TABLE IF NOT EXISTS ${SCHEMA}.shift (ms bigint NOT NULL)`,
  `INSERT INTO ${SCHEMA}.shift (ms) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM ${SCHEMA}.shift)`,
  `CREATE OR REPLACE FUNCTION ${SCHEMA}.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE AS
    $$ SELECT pg_catalog.clock_timestamp() + (SELECT ms FROM ${SCHEMA}.shift) * interval '1 millisecond' $$`,
];

/** A database clock the test moves ahead to the start of a fresh rate window, without a wait. */
export interface TestRateClock {
  /** Moves the clock to the start of the next `windowMs` window when the current one has less than `needMs` left. */
  freshWindow(windowMs: number, needMs: number): Promise<void>;
  close(): Promise<void>;
}

type Query = (sql: string, params?: unknown[]) => Promise<unknown[]>;

/** public first: what the service creates and reads stays there; the clock before pg_catalog. */
const SEARCH_PATH = `public, ${SCHEMA}, pg_catalog`;

function clockOver(query: Query, close: () => Promise<void>): TestRateClock {
  return {
    async freshWindow(windowMs, needMs) {
      const [row] = (await query(`SELECT (extract(epoch FROM ${SCHEMA}.clock_timestamp()) * 1000)::bigint AS now`)) as {
        now: string | number;
      }[];
      const left = windowMs - (Number(row?.now) % windowMs);
      if (left < needMs) await query(`UPDATE ${SCHEMA}.shift SET ms = ms + $1`, [left + 1]);
    },
    close,
  };
}

/**
 * Installs the test clock in the PostgreSQL database at `url` and makes it every new
 * session's (ALTER DATABASE ... SET search_path): call it before any process connects.
 */
export async function installRateClock(url: string): Promise<TestRateClock> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  for (const sql of INSTALL) await client.query(sql);
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  await client.query(`ALTER DATABASE "${name}" SET search_path = ${SEARCH_PATH}`);
  return clockOver(
    async (sql, params) => (await client.query(sql, params)).rows,
    () => client.end(),
  );
}

/** The same on an embedded database, whose one session every query of the process shares. */
export async function installRateClockOn(db: {
  query(sql: string, params?: readonly unknown[]): Promise<unknown[]>;
}): Promise<TestRateClock> {
  for (const sql of INSTALL) await db.query(sql);
  await db.query(`SET search_path = ${SEARCH_PATH}`);
  return clockOver(
    (sql, params) => db.query(sql, params),
    async () => {},
  );
}
