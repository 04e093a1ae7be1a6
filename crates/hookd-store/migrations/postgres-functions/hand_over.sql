-- hookd function hand_over, definition 1.
-- Confirms the handover of a batch's new deliveries that `publish_batch` wrote `sending`
-- under this process's leases (`leases` not NULL) without the claims' lock, and committed:
-- under that lock (with `cluster_limits`), each endpoint keeps no more of them than the room
-- its ceiling leaves after every other live lease, across processes, and none if it is
-- disabled, rate-limited or paused; the rest go back to pending, due at `due`. So an
-- endpoint's attempts started never pass its ceiling: a claim or a handover that ran before
-- the batch's commit is counted here, and one after it counts the batch's rows as busy. Like a
-- claim it commits without waiting for the WAL flush: lost with the server, the rows it put
-- back are still under their leases, and are sent once those end.
CREATE OR REPLACE FUNCTION hand_over(
    delivery_messages TEXT[], delivery_endpoints TEXT[], leases BIGINT[], due BIGINT[],
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
    -- `written`: the batch's rows still `sending` under its leases (an endpoint or message
    -- deleted meanwhile took its rows along). `room`: how many of them each endpoint keeps.
    -- `ranked`: the first of each endpoint's are kept, the rest `reverted`.
    RETURN QUERY
    WITH written AS (
        SELECT r.message_id, r.endpoint_id, r.lease, r.due, r.ord
        FROM unnest(delivery_messages, delivery_endpoints, leases, due) WITH ORDINALITY
            AS r(message_id, endpoint_id, lease, due, ord)
        CROSS JOIN LATERAL (
            SELECT FROM deliveries d
            WHERE d.message_id = r.message_id AND d.endpoint_id = r.endpoint_id
              AND d.status = 3 AND d.next_attempt_at = r.lease
        ) d
        WHERE r.lease IS NOT NULL
    ), room AS (
        SELECT e.id,
               CASE WHEN e.disabled
                         OR (cluster_limits AND (COALESCE(e.throttle_rate, 0) <> 0
                                                 OR COALESCE(e.next_window_at, 0) > now_ms))
                    THEN 0
                    ELSE LEAST(per_endpoint, COALESCE(e.max_concurrency, per_endpoint))
                         - (busy.n - asked.n) END AS n
        -- Those of its rows busy counts: leases still live.
        FROM (SELECT w.endpoint_id, count(*) FILTER (WHERE w.lease > now_ms) AS n
              FROM written w GROUP BY 1) asked
        CROSS JOIN LATERAL (
            SELECT * FROM endpoints WHERE id = asked.endpoint_id OFFSET 0
        ) e
        CROSS JOIN LATERAL (
            SELECT count(*) AS n FROM deliveries f
            WHERE cluster_limits AND f.endpoint_id = e.id AND f.status = 3
              AND f.next_attempt_at > now_ms
        ) busy
    ), ranked AS (
        SELECT w.message_id, w.endpoint_id, w.due,
               row_number() OVER (PARTITION BY w.endpoint_id ORDER BY w.ord)
                   <= COALESCE(o.n, 0) AS kept
        FROM written w LEFT JOIN room o ON o.id = w.endpoint_id
    ), reverted AS (
        UPDATE deliveries d SET status = 1, next_attempt_at = k.due
        FROM ranked k
        WHERE NOT k.kept AND d.message_id = k.message_id AND d.endpoint_id = k.endpoint_id
    )
    SELECT k.message_id, k.endpoint_id FROM ranked k WHERE k.kept;
END
$$;

-- A batch of publishes, then its handover, in two transactions of one call. `publish_batch`
-- writes the batch, the deliveries the engine asked for `sending` under its leases (within
-- the engine's own room, without the claims' lock), and commits, waiting for the WAL flush;
-- then `hand_over` takes the claims' lock only for its own short commit, which waits for none.
-- So neither claims nor other handovers wait behind a publish's flush, and a delivery handed
-- over is written once, as before. A failed handover hands nothing: its rows go back to
-- pending (or, if even that fails, wait for their leases to end); the batch stays committed.
CREATE OR REPLACE PROCEDURE publish_and_hand_over(
    message_ids TEXT[], app_ids TEXT[], event_types TEXT[], event_ids TEXT[], channels TEXT[],
    payloads BYTEA[], created BIGINT[], ordering_keys TEXT[], tags TEXT[],
    delivery_messages TEXT[], delivery_endpoints TEXT[], delivery_due BIGINT[],
    delivery_leases BIGINT[], delivery_keys TEXT[],
    now_ms BIGINT, per_endpoint BIGINT, cluster_limits BOOLEAN,
    INOUT written TEXT[], INOUT handed_messages TEXT[], INOUT handed_endpoints TEXT[])
LANGUAGE plpgsql AS $$
BEGIN
    -- Without cluster limits `publish_batch` takes no lock and counts no other process's
    -- leases: `hand_over` does both.
    SELECT array_agg(p.written_id) INTO written
    FROM publish_batch(message_ids, app_ids, event_types, event_ids, channels, payloads,
        created, ordering_keys, tags, delivery_messages, delivery_endpoints, delivery_due,
        delivery_leases, delivery_keys, now_ms, per_endpoint, false) p
    WHERE p.claimed_endpoint IS NULL;
    COMMIT;
    IF EXISTS (SELECT FROM unnest(delivery_leases) l WHERE l IS NOT NULL) THEN
        BEGIN
            SELECT array_agg(h.handed_message), array_agg(h.handed_endpoint)
            INTO handed_messages, handed_endpoints
            FROM hand_over(delivery_messages, delivery_endpoints, delivery_leases,
                           delivery_due, now_ms, per_endpoint, cluster_limits) h;
        EXCEPTION WHEN OTHERS THEN
            handed_messages := NULL;
            handed_endpoints := NULL;
            BEGIN
                UPDATE deliveries d SET status = 1, next_attempt_at = r.due
                FROM unnest(delivery_messages, delivery_endpoints, delivery_leases,
                            delivery_due) r(message_id, endpoint_id, lease, due)
                WHERE d.message_id = r.message_id AND d.endpoint_id = r.endpoint_id
                  AND d.status = 3 AND d.next_attempt_at = r.lease;
            EXCEPTION WHEN OTHERS THEN
                NULL;
            END;
        END;
    END IF;
END
$$;
