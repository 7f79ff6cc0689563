// The names of task types and events are written once (tasks/task-types.ts, tasks/events.ts,
// assets/types.ts) and taken from there everywhere else; migrations already applied cannot
// import them, so the lists their SQL holds are read back from a migrated database here and
// must be the registry's: the outbox's CHECK of event names, the trigger that moves an asset
// with its task, and the triggers that follow an export.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { WEBHOOK_EVENTS } from '../../src/api/contract/webhook.ts';
import { ASSET_EVENT_NAMES } from '../../src/assets/index.ts';
import type { Db } from '../../src/db/index.ts';
import { STREAM_EVENT_NAMES } from '../../src/live/index.ts';
import {
  ASSET_TASK_TYPES,
  CLIENT_TASK_TYPES,
  ENCODING_TASK_TYPES,
  TASK_EVENT_NAMES,
  TASK_TYPES,
} from '../../src/tasks/index.ts';
import { databaseKinds, openTestDb } from '../helpers/server.ts';

/** The quoted names in a piece of SQL (`'task.spawned'::text` gives task.spawned), sorted. */
const quoted = (sql: string) => [...sql.matchAll(/'([^']*)'/g)].map((m) => m[1] ?? '').sort();
const sorted = (names: readonly string[]) => [...names].sort();

describe('the registry of task types and event names', () => {
  it('every list is made of registered names', () => {
    assert.deepEqual(sorted(CLIENT_TASK_TYPES), sorted(Object.values(TASK_TYPES)));
    for (const list of [ENCODING_TASK_TYPES, ASSET_TASK_TYPES])
      for (const type of list) assert.ok(CLIENT_TASK_TYPES.includes(type), type);
    assert.deepEqual([...WEBHOOK_EVENTS], [...TASK_EVENT_NAMES, ...ASSET_EVENT_NAMES, ...STREAM_EVENT_NAMES]);
  });
});

for (const { kind, skip } of await databaseKinds()) {
  describe(`the migrations' SQL names what the registry does (${kind} database)`, { skip }, () => {
    let db: Db;
    before(async () => {
      db = await openTestDb(kind);
    });
    after(() => db?.close());

    const triggerWhen = async (name: string) => {
      const rows = await db.query<{ def: string }>(
        `SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgname = $1 AND tgrelid = 'tasks'::regclass`,
        [name],
      );
      const def = rows[0]?.def;
      assert.ok(def, `no trigger ${name} on tasks`);
      // Only the task types it names: the WHEN's comparisons with NEW.type (PostgreSQL gives
      // `NEW.type IN ('a', 'b')` back as `new.type = ANY (ARRAY['a'::text, 'b'::text])`).
      return quoted(
        [...def.matchAll(/new\.type\s*=\s*(ANY\s*\(ARRAY\[[^\]]*\]\)|'[^']*')/gi)].map((m) => m[1]).join(' '),
      );
    };

    it("the outbox's CHECK allows exactly the webhook events", async () => {
      const rows = await db.query<{ def: string }>(
        `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'task_events_event_check'`,
      );
      assert.equal(rows.length, 1);
      assert.deepEqual(quoted(rows[0]?.def ?? ''), sorted(WEBHOOK_EVENTS));
    });

    it('an asset follows the tasks of the asset task types, and its storage the export task', async () => {
      assert.deepEqual(await triggerWhen('tasks_move_assets'), sorted(ASSET_TASK_TYPES));
      for (const trigger of ['tasks_start_asset_storage', 'tasks_move_asset_storage'])
        assert.deepEqual(await triggerWhen(trigger), [TASK_TYPES.export], trigger);
    });
  });
}
