-- hookd function hand_over, definition 1.
-- Hands a process's engine the new deliveries it asked for (`leases` not NULL), committed
-- already by `publish_batch`: each still queued (pending and due, not waiting behind its
-- ordering key, not claimed meanwhile) becomes `sending` under its lease, as a claim would
-- make it, within the room its endpoint's ceiling leaves after every process's live leases
-- (with `cluster_limits`, under the claims' advisory lock). Rate-limited and paused endpoints
-- are left to claims. Like a claim it commits without waiting for the WAL flush: lost with
-- the server, its deliveries are still due, and are sent again.
CREATE OR REPLACE FUNCTION hand_over(
    delivery_messages TEXT[], delivery_endpoints TEXT[], leases BIGINT[],
    now_ms BIGINT, per_endpoint BIGINT, cluster_limits BOOLEAN)
RETURNS TABLE (handed_message TEXT, handed_endpoint TEXT)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
BEGIN
    IF cluster_limits THEN
        PERFORM pg_advisory_xact_lock(448546171748);
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    -- `queued`: the deliveries asked for that are still queued, locked (one a claimer holds
    -- is skipped: it is that claimer's). `room`: for each of their endpoints, how many it may
    -- still take. `chosen`: the first of each endpoint's, within its room.
    RETURN QUERY
    WITH queued AS (
        SELECT r.message_id, r.endpoint_id, r.lease, r.ord
        FROM unnest(delivery_messages, delivery_endpoints, leases) WITH ORDINALITY
            AS r(message_id, endpoint_id, lease, ord)
        CROSS JOIN LATERAL (
            SELECT FROM deliveries d
            WHERE d.message_id = r.message_id AND d.endpoint_id = r.endpoint_id
              AND d.status = 1 AND d.next_attempt_at IS NOT NULL
            FOR UPDATE SKIP LOCKED
        ) d
        WHERE r.lease IS NOT NULL
    ), room AS (
        SELECT e.id, LEAST(per_endpoint, COALESCE(e.max_concurrency, per_endpoint)) - busy.n AS n
        FROM (SELECT DISTINCT q.endpoint_id FROM queued q) asked
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
    ), chosen AS (
        SELECT q.message_id, q.endpoint_id, q.lease
        FROM (SELECT q.*, row_number() OVER (PARTITION BY q.endpoint_id ORDER BY q.ord) AS nth
              FROM queued q) q
        JOIN room o ON o.id = q.endpoint_id
        WHERE q.nth <= o.n
    )
    UPDATE deliveries d SET status = 3, next_attempt_at = c.lease
    FROM chosen c
    WHERE d.message_id = c.message_id AND d.endpoint_id = c.endpoint_id
    RETURNING d.message_id, d.endpoint_id;
END
$$;

-- A batch of publishes, then its handover, in two transactions of one call: `publish_batch`
-- writes every delivery queued (no leases: it takes no claims' lock) and commits, waiting for
-- the WAL flush; then `hand_over` takes the claims' lock only for its own short commit, which
-- does not wait for one. So neither claims nor other handovers wait behind a publish's flush.
-- A failed handover hands nothing: the batch is committed, its deliveries are left queued.
CREATE OR REPLACE PROCEDURE publish_and_hand_over(
    message_ids TEXT[], app_ids TEXT[], event_types TEXT[], event_ids TEXT[], channels TEXT[],
    payloads BYTEA[], created BIGINT[], ordering_keys TEXT[], tags TEXT[],
    delivery_messages TEXT[], delivery_endpoints TEXT[], delivery_due BIGINT[],
    delivery_leases BIGINT[], delivery_keys TEXT[],
    now_ms BIGINT, per_endpoint BIGINT, cluster_limits BOOLEAN,
    INOUT written TEXT[], INOUT handed_messages TEXT[], INOUT handed_endpoints TEXT[])
LANGUAGE plpgsql AS $$
BEGIN
    SELECT array_agg(p.written_id) INTO written
    FROM publish_batch(message_ids, app_ids, event_types, event_ids, channels, payloads,
        created, ordering_keys, tags, delivery_messages, delivery_endpoints, delivery_due,
        array_fill(NULL::BIGINT, ARRAY[cardinality(delivery_messages)]), delivery_keys,
        now_ms, per_endpoint, cluster_limits) p;
    COMMIT;
    IF EXISTS (SELECT FROM unnest(delivery_leases) l WHERE l IS NOT NULL) THEN
        BEGIN
            SELECT array_agg(h.handed_message), array_agg(h.handed_endpoint)
            INTO handed_messages, handed_endpoints
            FROM hand_over(delivery_messages, delivery_endpoints, delivery_leases, now_ms,
                           per_endpoint, cluster_limits) h;
        EXCEPTION WHEN OTHERS THEN
            handed_messages := NULL;
            handed_endpoints := NULL;
        END;
    END IF;
END
$$;
