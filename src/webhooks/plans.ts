import { NEWEST_FIRST, olderThanCursor } from '../lib/paging.ts';

// All SQL of the webhooks domain, in one place (after pg-boss's plans.ts). Tables: migration
// 300_webhooks.sql; the outbox task_events: migration 003 (tasks/events.ts writes it).
//
// Deliveries are a queue of their own: fan-out turns each undispatched event into one
// pending delivery per subscribed webhook; a process claims due deliveries with a lease; the
// outcome of an attempt is written with the claim's number, so a process whose lease ran out
// (and whose delivery another process claimed) cannot overwrite what came after it.

/** The columns of a WebhookRow (camelCase aliases: rows come back in the domain's shape). */
const WEBHOOK = `id, owner, project_id AS "projectId", name, url, events, created_at AS "createdAt",
  updated_at AS "updatedAt", last_triggered_at AS "lastTriggeredAt", last_failure AS "lastFailure",
  shared_secret IS NOT NULL AS signed`;

/** The columns of a DeliveryLogRow. */
const LOG = `id, webhook_id AS "webhookId", event_id AS "eventId", event, created_at AS "createdAt",
  duration_ms AS "durationMs", url, request_body AS "requestBody", request_headers AS "requestHeaders",
  status_code AS "statusCode", status_text AS "statusText", error, response_body AS "responseBody", success`;

/**
 * Adds a webhook while the owner has fewer than $8 (issue #25: one owner's webhooks are one
 * event's fan-out). The count and the insert are one statement, so concurrent requests can
 * overshoot the limit only by those in flight at the same instant; the count stops at the
 * limit, so its cost does not grow with an owner's history. No row: the limit is reached.
 */
export const createWebhook = `INSERT INTO webhooks (id, owner, project_id, name, url, events, shared_secret)
  SELECT $1, $2, $3, $4, $5, $6::text[], $7
  WHERE (SELECT count(*) FROM (SELECT 1 FROM webhooks WHERE owner = $2 AND deleted_at IS NULL LIMIT $8) AS live) < $8
  RETURNING ${WEBHOOK}`;

export const getWebhook = `SELECT ${WEBHOOK} FROM webhooks WHERE id = $1 AND owner = $2 AND deleted_at IS NULL`;

/** Newest first; the cursor is the last id of the previous page ((created_at, id) orders ties). */
export const listWebhooks = `SELECT ${WEBHOOK} FROM webhooks WHERE owner = $1 AND deleted_at IS NULL
    AND ${olderThanCursor({ table: 'webhooks', cursor: '$2', scope: 'owner = $1' })} ${NEWEST_FIRST} LIMIT $3`;

/** Replaces what an owner gave (Livepeer's PUT): a secret left out is no secret any more. */
export const updateWebhook = `UPDATE webhooks SET name = $3, url = $4, events = $5::text[], shared_secret = $6,
    updated_at = now()
  WHERE id = $1 AND owner = $2 AND deleted_at IS NULL RETURNING ${WEBHOOK}`;

/**
 * Changes only what an owner gave (PATCH, a JSON merge patch): NULL keeps the name, URL and
 * events; the secret is written only when $6 says it was given ($7 NULL: removed).
 */
export const patchWebhook = `UPDATE webhooks SET name = COALESCE($3, name), url = COALESCE($4, url),
    events = COALESCE($5::text[], events), shared_secret = CASE WHEN $6::boolean THEN $7 ELSE shared_secret END,
    updated_at = now()
  WHERE id = $1 AND owner = $2 AND deleted_at IS NULL RETURNING ${WEBHOOK}`;

/** Soft delete (logs keep their webhook); deliveries not yet made are given up with it. */
export const deleteWebhook = `WITH gone AS (
    UPDATE webhooks SET deleted_at = now(), updated_at = now()
    WHERE id = $1 AND owner = $2 AND deleted_at IS NULL RETURNING ${WEBHOOK}
  ), dropped AS (
    UPDATE webhook_deliveries SET status = 'failed', lease_until = NULL, finished_at = now()
    WHERE webhook_id IN (SELECT id FROM gone) AND status = 'pending'
  )
  SELECT * FROM gone`;

/** An owner's webhook's attempts, newest first, with the same cursor rule as the lists. */
export const listLogs = `SELECT ${LOG} FROM webhook_logs WHERE webhook_id = $1
    AND ${olderThanCursor({ table: 'webhook_logs', cursor: '$2', scope: 'webhook_id = $1' })} ${NEWEST_FIRST} LIMIT $3`;

export const getLog = `SELECT ${LOG} FROM webhook_logs WHERE id = $1 AND webhook_id = $2`;

/**
 * What a resend needs: the logged request (the event as it was sent) and the webhook as it is
 * now, its secret included (only the dispatcher reads it, never the store).
 */
export const resendSource = `SELECT l.delivery_id AS "deliveryId", l.event_id AS "eventId", l.event,
    l.request_body AS "requestBody", w.url, w.shared_secret AS "sharedSecret"
  FROM webhook_logs l JOIN webhooks w ON w.id = l.webhook_id
  WHERE l.id = $1 AND l.webhook_id = $2 AND w.owner = $3 AND w.deleted_at IS NULL`;

/**
 * Fan-out, one statement (so one transaction): takes up to $1 undispatched events (SKIP
 * LOCKED: two processes take different ones), adds a pending delivery for every webhook of
 * the event's owner that subscribes to it and existed when it happened, and marks the events
 * dispatched. A process dying in between leaves nothing half done.
 */
export const fanOut = `WITH ev AS (
    SELECT id, owner, event, created_at FROM task_events WHERE dispatched_at IS NULL
    ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED
  ), added AS (
    INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, next_attempt_at)
    SELECT gen_random_uuid(), w.id, ev.id, 'pending', now()
    FROM ev JOIN webhooks w ON w.owner = ev.owner AND w.deleted_at IS NULL AND ev.event = ANY (w.events)
      AND w.created_at <= ev.created_at
    ON CONFLICT (event_id, webhook_id) DO NOTHING
    RETURNING id
  ), marked AS (
    UPDATE task_events SET dispatched_at = now() WHERE id IN (SELECT id FROM ev) RETURNING id
  )
  SELECT (SELECT count(*) FROM marked)::int AS events, (SELECT count(*) FROM added)::int AS deliveries`;

/** Attempts in a row without an answer in time after which a webhook gets one delivery in flight at most. */
export const TIMING_OUT_AFTER = 2;

/**
 * The deliveries that may be claimed now: pending, due, and not leased or leased by a
 * process that stopped (its lease ran out). A webhook that keeps timing out (issue #25)
 * offers only its earliest one, and none while one of its deliveries is in flight: a
 * receiver that holds requests open holds one slot, not one per event. With the owner.
 */
const ELIGIBLE = `eligible AS (
    SELECT d.id, d.next_attempt_at, d.created_at, w.owner FROM (
      SELECT id, webhook_id, next_attempt_at, created_at,
        row_number() OVER (PARTITION BY webhook_id ORDER BY next_attempt_at, created_at) AS nth
      FROM webhook_deliveries
      WHERE status = 'pending' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
    ) d JOIN webhooks w ON w.id = d.webhook_id
    WHERE w.timeouts_in_a_row < ${TIMING_OUT_AFTER} OR (d.nth = 1 AND NOT EXISTS (
      SELECT 1 FROM webhook_deliveries f
      WHERE f.webhook_id = d.webhook_id AND f.status = 'pending' AND f.lease_until >= now()))
  )`;

/** The owners with deliveries to claim, the longest waiting first, at most $1 of them. */
export const dueOwners = `WITH ${ELIGIBLE}
  SELECT owner FROM eligible GROUP BY owner ORDER BY min(next_attempt_at) LIMIT $1`;

/**
 * Claims up to $1 due deliveries for $2 ms (the send's timeout and a margin), at most $4[i]
 * of owner $3[i]'s, taken in turns: each owner's earliest, then each one's second, ... so one
 * owner's backlog does not go before another's first delivery (issue #25). Each claim counts
 * as an attempt; its number is the token the outcome is written with. The lock re-checks
 * that the delivery is still unclaimed. Returns what a send needs: the webhook (its secret
 * included), the event and its owner.
 */
export const claimDeliveries = `WITH ${ELIGIBLE}, turns AS (
    SELECT e.id, e.next_attempt_at, a.n,
      row_number() OVER (PARTITION BY e.owner ORDER BY e.next_attempt_at, e.created_at) AS turn
    FROM eligible e JOIN unnest($3::text[], $4::int[]) AS a (owner, n) ON a.owner = e.owner
  ), picked AS (
    SELECT id FROM turns WHERE turn <= n ORDER BY turn, next_attempt_at LIMIT $1
  ), claimed AS (
    UPDATE webhook_deliveries SET lease_until = now() + $2 * interval '1 millisecond', attempts = attempts + 1
    WHERE id IN (
      SELECT id FROM webhook_deliveries
      WHERE id IN (SELECT id FROM picked) AND status = 'pending' AND (lease_until IS NULL OR lease_until < now())
      FOR UPDATE SKIP LOCKED)
    RETURNING id, webhook_id, event_id, attempts
  )
  SELECT c.id, c.attempts, w.id AS "webhookId", w.url, w.shared_secret AS "sharedSecret",
    w.deleted_at IS NOT NULL AS "webhookDeleted",
    e.id AS "eventId", e.task_id, e.owner, e.event, e.task, e.created_at
  FROM claimed c JOIN webhooks w ON w.id = c.webhook_id JOIN task_events e ON e.id = c.event_id
  ORDER BY e.created_at`;

/** Gives up a claimed delivery without sending it (its webhook was deleted meanwhile). */
export const dropDelivery = `UPDATE webhook_deliveries SET status = 'failed', lease_until = NULL, finished_at = now()
  WHERE id = $1 AND attempts = $2 AND status = 'pending'`;

/**
 * Records one attempt, in one statement: the log row, the webhook's status (last triggered,
 * last failure, timeouts in a row: $20 true when no answer came in time, reset by any
 * answer) and, for a claimed delivery ($2 its id, $3 the claim's number; NULL for a
 * resend, which changes no delivery), its next state: delivered; pending again after $5 ms
 * while the event is younger than $6 ms (the retry window); failed otherwise.
 * $4: 'delivered' | 'retry' | 'failed'.
 */
export const recordAttempt = `WITH verdict AS (
    SELECT CASE WHEN $4::text = 'delivered' THEN 'delivered'
      WHEN $4::text = 'retry' AND now() < $7::timestamptz + $6::bigint * interval '1 millisecond' THEN 'pending'
      ELSE 'failed' END AS status
  ), delivery AS (
    UPDATE webhook_deliveries d SET status = verdict.status, lease_until = NULL,
      next_attempt_at = CASE WHEN verdict.status = 'pending'
        THEN LEAST(now() + $5::bigint * interval '1 millisecond', $7::timestamptz + $6::bigint * interval '1 millisecond')
        ELSE d.next_attempt_at END,
      finished_at = CASE WHEN verdict.status = 'pending' THEN NULL ELSE now() END
    FROM verdict
    WHERE d.id = $2::uuid AND d.attempts = $3::int AND d.status = 'pending'
    RETURNING d.status
  ), logged AS (
    INSERT INTO webhook_logs (id, webhook_id, delivery_id, event_id, event, duration_ms, url, request_body,
      request_headers, status_code, status_text, error, response_body, success)
    VALUES ($1, $8, $2::uuid, $9, $10, $11, $12, $13, $14::jsonb, $15, $16, $17, $18, $4::text = 'delivered')
    RETURNING ${LOG}
  ), status AS (
    UPDATE webhooks SET last_triggered_at = now(),
      last_failure = CASE WHEN $4::text = 'delivered' THEN last_failure ELSE $19::jsonb END,
      timeouts_in_a_row = CASE WHEN $20::boolean THEN timeouts_in_a_row + 1
        WHEN $15::int IS NOT NULL THEN 0 ELSE timeouts_in_a_row END
    WHERE id = $8
  )
  SELECT logged.*, (SELECT status FROM delivery) AS "deliveryStatus" FROM logged`;

/** Undelivered work: pending deliveries and events not yet fanned out (a gauge). */
export const pendingCount = `SELECT
  (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending')::int
  + (SELECT count(*) FROM task_events WHERE dispatched_at IS NULL)::int AS n`;

// Retention (issue #25): the sweep deletes old history a batch at a time (SKIP LOCKED: two
// sweeping processes take different rows). Indexes: migration 390_webhook_retention.sql.

/** Up to $2 log rows older than $1 ms (what GET /api/webhook/{id}/log shows), oldest first. */
export const purgeLogs = `WITH gone AS (
    DELETE FROM webhook_logs WHERE id IN (
      SELECT id FROM webhook_logs WHERE created_at < now() - $1::bigint * interval '1 millisecond'
      ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING 1)
  SELECT count(*)::int AS n FROM gone`;

/**
 * Up to $2 deliveries that finished (delivered, or given up) more than $1 ms ago and that no
 * log names any more; a pending delivery is never purged, and an event is purged only once
 * none of its deliveries is left (tasks/queue.ts purgeEvents).
 */
export const purgeDeliveries = `WITH gone AS (
    DELETE FROM webhook_deliveries WHERE id IN (
      SELECT d.id FROM webhook_deliveries d
      WHERE d.status <> 'pending' AND d.finished_at < now() - $1::bigint * interval '1 millisecond'
        AND NOT EXISTS (SELECT 1 FROM webhook_logs l WHERE l.delivery_id = d.id)
      LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING 1)
  SELECT count(*)::int AS n FROM gone`;
