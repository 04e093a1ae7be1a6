-- hookd schema v12 (SQLite): ordered delivery.
--
-- A message may carry an ordering key; a delivery carries the key it is ordered under (the
-- message's, or '' for every delivery to a `strict` endpoint). Of the unsettled deliveries
-- that share an endpoint and a key, only the oldest is queued (`next_attempt_at` set: due,
-- claimed or retrying); the rest wait with `next_attempt_at` NULL and status pending, outside
-- the claim's index, until the one ahead settles.
ALTER TABLE messages ADD COLUMN ordering_key TEXT;
ALTER TABLE deliveries ADD COLUMN ordering_key TEXT;
ALTER TABLE endpoints ADD COLUMN strict_order INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN ordering_key TEXT;

-- At most one queued delivery per endpoint and key: the database itself refuses a second.
CREATE UNIQUE INDEX deliveries_key_head ON deliveries (endpoint_id, ordering_key)
    WHERE ordering_key IS NOT NULL AND next_attempt_at IS NOT NULL;
-- The deliveries waiting behind a key's head, oldest first.
CREATE INDEX deliveries_key_waiting ON deliveries (endpoint_id, ordering_key, message_id)
    WHERE ordering_key IS NOT NULL AND next_attempt_at IS NULL AND status = 1;

-- When a key's queued delivery leaves the queue (it succeeded, failed for good, was skipped,
-- or its message was deleted), the oldest delivery waiting behind it becomes due. Written as
-- triggers so that no path that settles or deletes a delivery can forget it.
CREATE TRIGGER deliveries_next_in_order AFTER UPDATE OF next_attempt_at ON deliveries
    WHEN OLD.ordering_key IS NOT NULL AND OLD.next_attempt_at IS NOT NULL
        AND NEW.next_attempt_at IS NULL
BEGIN
    UPDATE deliveries SET next_attempt_at = NEW.updated_at, updated_at = NEW.updated_at
    WHERE endpoint_id = OLD.endpoint_id AND message_id = (
        SELECT w.message_id FROM deliveries w
        WHERE w.endpoint_id = OLD.endpoint_id AND w.ordering_key = OLD.ordering_key
          AND w.next_attempt_at IS NULL AND w.status = 1
        ORDER BY w.message_id LIMIT 1);
END;
CREATE TRIGGER deliveries_next_in_order_after_delete AFTER DELETE ON deliveries
    WHEN OLD.ordering_key IS NOT NULL AND OLD.next_attempt_at IS NOT NULL
BEGIN
    UPDATE deliveries SET next_attempt_at = OLD.updated_at
    WHERE endpoint_id = OLD.endpoint_id AND message_id = (
        SELECT w.message_id FROM deliveries w
        WHERE w.endpoint_id = OLD.endpoint_id AND w.ordering_key = OLD.ordering_key
          AND w.next_attempt_at IS NULL AND w.status = 1
        ORDER BY w.message_id LIMIT 1);
END;
