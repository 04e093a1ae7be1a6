-- hookd function deliveries_in_order, definition 1.
-- Keeps each endpoint's deliveries that share an ordering key one at a time, in message order,
-- on every path that writes deliveries (publish, record, resend, recover, skip, deletion), in
-- every process. Of a key's unsettled deliveries only the oldest is queued (`next_attempt_at`
-- set); the rest wait (`next_attempt_at` NULL, status pending).
--
-- Each step runs under a transaction-scoped advisory lock, so that of two transactions racing
-- on one key, the second sees what the first committed: two publishes never both write a
-- queued delivery, and a publish that writes a waiting one is never missed by the record that
-- settles the one ahead. The lock is the key's (an application's key, for every endpoint at
-- once), or for a strict endpoint's deliveries (key '') the endpoint's: coarser than one per
-- endpoint and key, so a batch fanning a message out to many endpoints takes one lock, not one
-- per endpoint (PostgreSQL's lock table is small). A batch takes its locks in the order of
-- their ids, and so does every other, so two batches never wait for each other's.

-- The id of the lock that orders endpoint `ep`'s deliveries of key `k`.
CREATE OR REPLACE FUNCTION ordering_lock(ep TEXT, k TEXT) RETURNS INTEGER
LANGUAGE sql IMMUTABLE AS $$
    SELECT hashtext(CASE WHEN k = '' THEN 'endpoint/' || ep ELSE 'key/' || k END);
$$;

-- Takes that lock (class 1752133483 is "hook": apart from hookd's other locks).
CREATE OR REPLACE FUNCTION lock_ordering_key(ep TEXT, k TEXT) RETURNS VOID
LANGUAGE sql VOLATILE AS $$
    SELECT pg_advisory_xact_lock(1752133483, ordering_lock(ep, k));
$$;

-- Takes the locks of every (endpoint, key) pair of the arrays (those with a key), in the
-- order of their ids.
CREATE OR REPLACE FUNCTION lock_ordering_keys(eps TEXT[], ks TEXT[]) RETURNS VOID
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1752133483, l.id)
    FROM (SELECT DISTINCT ordering_lock(p.ep, p.k) AS id
          FROM unnest(eps, ks) AS p(ep, k) WHERE p.k IS NOT NULL ORDER BY 1) l;
END
$$;

-- Makes the oldest delivery waiting under (ep, k) due at `at`, unless one is queued already.
CREATE OR REPLACE FUNCTION queue_next_in_order(ep TEXT, k TEXT, at BIGINT) RETURNS VOID
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM lock_ordering_key(ep, k);
    UPDATE deliveries SET next_attempt_at = at, updated_at = at
    WHERE endpoint_id = ep AND ordering_key = k AND next_attempt_at IS NULL AND status = 1
      AND message_id = (
          SELECT w.message_id FROM deliveries w
          WHERE w.endpoint_id = ep AND w.ordering_key = k
            AND w.next_attempt_at IS NULL AND w.status = 1
          ORDER BY w.message_id LIMIT 1)
      AND NOT EXISTS (
          SELECT FROM deliveries h
          WHERE h.endpoint_id = ep AND h.ordering_key = k AND h.next_attempt_at IS NOT NULL);
END
$$;

-- Before a delivery with a key is inserted: it waits if its key has an unsettled delivery.
-- After a queued one leaves the queue (settled, made to wait, or deleted): the next is due.
CREATE OR REPLACE FUNCTION deliveries_in_order() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM lock_ordering_key(NEW.endpoint_id, NEW.ordering_key);
        IF EXISTS (SELECT FROM deliveries d
                   WHERE d.endpoint_id = NEW.endpoint_id AND d.ordering_key = NEW.ordering_key
                     AND d.next_attempt_at IS NOT NULL)
           OR EXISTS (SELECT FROM deliveries d
                   WHERE d.endpoint_id = NEW.endpoint_id AND d.ordering_key = NEW.ordering_key
                     AND d.next_attempt_at IS NULL AND d.status = 1) THEN
            NEW.status := 1;
            NEW.next_attempt_at := NULL;
        END IF;
        RETURN NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM queue_next_in_order(OLD.endpoint_id, OLD.ordering_key, NEW.updated_at);
    ELSE
        PERFORM queue_next_in_order(OLD.endpoint_id, OLD.ordering_key, OLD.updated_at);
    END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER deliveries_wait_in_order BEFORE INSERT ON deliveries
    FOR EACH ROW WHEN (NEW.ordering_key IS NOT NULL) EXECUTE FUNCTION deliveries_in_order();
CREATE OR REPLACE TRIGGER deliveries_next_in_order AFTER UPDATE OF next_attempt_at ON deliveries
    FOR EACH ROW WHEN (OLD.ordering_key IS NOT NULL AND OLD.next_attempt_at IS NOT NULL
                       AND NEW.next_attempt_at IS NULL)
    EXECUTE FUNCTION deliveries_in_order();
CREATE OR REPLACE TRIGGER deliveries_next_in_order_after_delete AFTER DELETE ON deliveries
    FOR EACH ROW WHEN (OLD.ordering_key IS NOT NULL AND OLD.next_attempt_at IS NOT NULL)
    EXECUTE FUNCTION deliveries_in_order();
