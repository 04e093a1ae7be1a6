-- hookd function publish_batch, definition 3.
-- Writes a batch of messages and their deliveries in one statement, and writes `sending` under
-- a lease the deliveries its process's engine asked for (`delivery_leases` not NULL), so the
-- engine starts them once committed, without a claim. A delivery handed over counts against its
-- endpoint's ceiling as a claimed one does, across every process (with `cluster_limits` it takes
-- the claims' advisory lock first); the rest are written pending, due at once. Rate-limited and
-- paused endpoints are left to claims. A delivery with an ordering key whose key has an
-- unsettled delivery is written waiting instead (the trigger `deliveries_wait_in_order`), and
-- so not handed over.
CREATE OR REPLACE FUNCTION publish_batch(
    message_ids TEXT[], app_ids TEXT[], event_types TEXT[], event_ids TEXT[], channels TEXT[],
    payloads BYTEA[], created BIGINT[], ordering_keys TEXT[], tags TEXT[],
    delivery_messages TEXT[], delivery_endpoints TEXT[], delivery_due BIGINT[],
    delivery_leases BIGINT[], delivery_keys TEXT[],
    now_ms BIGINT, per_endpoint BIGINT, cluster_limits BOOLEAN)
RETURNS TABLE (written_id TEXT, claimed_endpoint TEXT)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    -- The batch's ordering keys first, in the order every batch takes them (see
    -- deliveries_in_order.sql), then the claims' lock: a publish waiting for a key a record
    -- holds must not hold up the claims meanwhile.
    PERFORM lock_ordering_keys(delivery_endpoints, delivery_keys);
    IF cluster_limits AND EXISTS (SELECT FROM unnest(delivery_leases) l WHERE l IS NOT NULL) THEN
        PERFORM pg_advisory_xact_lock(448546171748);
    END IF;
    -- The applications and endpoints written to, each locked once (a missing one fails the
    -- batch as its foreign key did); the messages are new.
    PERFORM lock_parents(app_ids, NULL, delivery_endpoints);
    -- `written`: the messages, skipping any whose eventId is taken. `routed`: the deliveries of
    -- those written. `room`: for each endpoint asked for, how many it may still take. `decided`:
    -- the first deliveries asked for, within that room, go `sending` (3), the rest pending (1).
    RETURN QUERY
    WITH written AS (
        INSERT INTO messages (id, app_id, event_type, event_id, channels, payload, created_at,
                              ordering_key, tags)
        SELECT * FROM UNNEST(message_ids, app_ids, event_types, event_ids, channels, payloads,
                             created, ordering_keys, tags)
        ON CONFLICT (app_id, event_id) DO NOTHING
        RETURNING id
    ), routed AS (
        SELECT r.* FROM UNNEST(delivery_messages, delivery_endpoints, delivery_due,
                               delivery_leases, delivery_keys) WITH ORDINALITY
            AS r(message_id, endpoint_id, due, lease, ordering_key, ord)
        WHERE r.message_id IN (SELECT w.id FROM written w)
    ), room AS (
        SELECT e.id, LEAST(per_endpoint, COALESCE(e.max_concurrency, per_endpoint)) - busy.n AS n
        FROM (SELECT DISTINCT r.endpoint_id FROM routed r WHERE r.lease IS NOT NULL) asked
        CROSS JOIN LATERAL (
            SELECT * FROM endpoints WHERE id = asked.endpoint_id OFFSET 0
        ) e
        CROSS JOIN LATERAL (
            SELECT count(*) AS n FROM deliveries f
            WHERE cluster_limits AND f.endpoint_id = e.id AND f.status = 3
              AND f.next_attempt_at > now_ms
        ) busy
        WHERE NOT e.disabled
          AND (NOT cluster_limits
               OR (COALESCE(e.throttle_rate, 0) = 0 AND COALESCE(e.next_window_at, 0) <= now_ms))
    ), decided AS (
        SELECT r.message_id, r.endpoint_id, r.due, r.ordering_key,
               CASE WHEN r.lease IS NOT NULL
                         AND row_number() OVER (PARTITION BY r.endpoint_id, r.lease IS NULL
                                                ORDER BY r.ord) <= COALESCE(o.n, 0)
                    THEN r.lease END AS lease
        FROM routed r LEFT JOIN room o ON o.id = r.endpoint_id
    ), inserted AS (
        INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
                                next_attempt_at, updated_at, ordering_key)
        SELECT d.message_id, d.endpoint_id, CASE WHEN d.lease IS NULL THEN 1 ELSE 3 END, 0,
               COALESCE(d.lease, d.due), d.due, d.ordering_key
        FROM decided d
        -- Each key's oldest first: the trigger makes the later ones wait behind it (their
        -- locks are taken above).
        ORDER BY d.endpoint_id, d.ordering_key, d.message_id
        RETURNING deliveries.message_id, deliveries.endpoint_id, deliveries.status
    )
    SELECT w.id, NULL::TEXT FROM written w
    UNION ALL
    SELECT i.message_id, i.endpoint_id FROM inserted i WHERE i.status = 3;
END
$$;

-- The previous signature, for processes of the previous version during a rolling upgrade:
-- their messages carry no ordering key and no tags.
CREATE OR REPLACE FUNCTION publish_batch(
    message_ids TEXT[], app_ids TEXT[], event_types TEXT[], event_ids TEXT[], channels TEXT[],
    payloads BYTEA[], created BIGINT[],
    delivery_messages TEXT[], delivery_endpoints TEXT[], delivery_due BIGINT[],
    delivery_leases BIGINT[],
    now_ms BIGINT, per_endpoint BIGINT, cluster_limits BOOLEAN)
RETURNS TABLE (written_id TEXT, claimed_endpoint TEXT)
LANGUAGE sql VOLATILE AS $$
    SELECT * FROM publish_batch(message_ids, app_ids, event_types, event_ids, channels,
        payloads, created, array_fill(NULL::TEXT, ARRAY[cardinality(message_ids)]),
        array_fill(NULL::TEXT, ARRAY[cardinality(message_ids)]), delivery_messages, delivery_endpoints, delivery_due, delivery_leases,
        array_fill(NULL::TEXT, ARRAY[cardinality(delivery_messages)]),
        now_ms, per_endpoint, cluster_limits);
$$;
