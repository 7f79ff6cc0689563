-- Webhook delivery that one owner cannot stall for the others (issue #25, hole 4): how many
-- attempts in a row to a webhook ended without an answer within the timeout. A webhook that
-- keeps timing out gets at most one delivery in flight until it answers again, so a receiver
-- that holds requests open costs one delivery slot, not one per pending event.
ALTER TABLE webhooks ADD COLUMN timeouts_in_a_row integer NOT NULL DEFAULT 0
;
