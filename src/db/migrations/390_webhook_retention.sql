-- Retention of webhook history (issue #25; webhooks/plans.ts purgeLogs, purgeDeliveries). In
-- the webhooks range rather than with 006_retention.sql: migrations run in name order, and
-- these tables are made by 300_webhooks.sql.
-- Logs older than the retention, oldest first.
CREATE INDEX webhook_logs_created_at ON webhook_logs (created_at)
;
-- A delivery is purged only when no log names it, and deleting one checks the foreign key
-- from webhook_logs: without this index each deleted delivery would scan every log.
CREATE INDEX webhook_logs_by_delivery ON webhook_logs (delivery_id)
;
-- Finished deliveries (delivered, or given up), by when they finished; pending ones are never purged.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at) WHERE status <> 'pending'
;
