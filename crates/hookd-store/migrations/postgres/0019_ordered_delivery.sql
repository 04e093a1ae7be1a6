-- hookd schema v19 (PostgreSQL): ordered delivery.
--
-- A message may carry an ordering key; a delivery carries the key it is ordered under (the
-- message's, or '' for every delivery to a `strict` endpoint). Of the unsettled deliveries
-- that share an endpoint and a key, only the oldest is queued (`next_attempt_at` set: due,
-- claimed or retrying); the rest wait with `next_attempt_at` NULL and status pending, outside
-- the claim's index, until the one ahead settles. The triggers that keep this are in
-- `postgres-functions/deliveries_in_order.sql`.
-- Keys compare byte by byte, as ids do (`COLLATE "C"`): the triggers' functions take the
-- endpoint id and the key together, and a key of another collation than the id's could not
-- be looked up in the indexes below.
ALTER TABLE messages ADD COLUMN ordering_key TEXT COLLATE "C";
ALTER TABLE deliveries ADD COLUMN ordering_key TEXT COLLATE "C";
ALTER TABLE endpoints ADD COLUMN strict_order BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE outbox ADD COLUMN ordering_key TEXT COLLATE "C";

-- At most one queued delivery per endpoint and key: the database itself refuses a second.
CREATE UNIQUE INDEX deliveries_key_head ON deliveries (endpoint_id, ordering_key)
    WHERE ordering_key IS NOT NULL AND next_attempt_at IS NOT NULL;
-- The deliveries waiting behind a key's head, oldest first.
CREATE INDEX deliveries_key_waiting ON deliveries (endpoint_id, ordering_key, message_id)
    WHERE ordering_key IS NOT NULL AND next_attempt_at IS NULL AND status = 1;
