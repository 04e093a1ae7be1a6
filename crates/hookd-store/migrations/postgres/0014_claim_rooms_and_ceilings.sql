-- hookd schema v14 (PostgreSQL): claims within each endpoint's room, under each endpoint's
-- ceiling.
--
-- An engine keeps a window of each busy endpoint's deliveries claimed ahead, and learns how
-- many attempts each endpoint takes at once; a claim now says how many more it takes of each
-- endpoint it already has work of (`room_ids`, `room_n`; 0 skips the endpoint), and
-- `per_endpoint` for any other. Across every process, an endpoint's deliveries in flight
-- (`sending` under a live lease) never pass its ceiling: the claim's `ceiling`, or the
-- endpoint's own `max_concurrency` if lower. `publish_batch` hands deliveries over under the
-- same ceiling. Otherwise as in v12 and v10; the old `claim_due` stays for processes of v13.

CREATE FUNCTION claim_due(now_ms BIGINT, room_ids TEXT[], room_n BIGINT[], most BIGINT,
                          per_endpoint BIGINT, ceiling BIGINT, lease_until BIGINT,
                          cluster_limits BOOLEAN)
RETURNS TABLE (delivery deliveries, message messages, endpoint endpoints, due BIGINT)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
#variable_conflict use_column
BEGIN
    IF cluster_limits THEN
        PERFORM pg_advisory_xact_lock(448546171748);
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    -- `queued` steps through the endpoints with deliveries queued, one probe each; `ready`
    -- finds each one's oldest due time and keeps the `most` endpoints waiting longest, with
    -- the room each has: the claimer's room for it, within its ceiling less its deliveries in
    -- flight anywhere, one second of its rate at most; `chosen` takes that many of each one's
    -- oldest due rows, skipping rows another claimer holds locked; `windows` moves
    -- rate-limited endpoints' next window past the attempts just claimed.
    RETURN QUERY
    WITH RECURSIVE queued AS (
        (SELECT d.endpoint_id AS id FROM deliveries d
         WHERE d.next_attempt_at IS NOT NULL ORDER BY d.endpoint_id, d.next_attempt_at LIMIT 1)
        UNION ALL
        SELECT (SELECT d.endpoint_id FROM deliveries d
                WHERE d.next_attempt_at IS NOT NULL AND d.endpoint_id > q.id
                ORDER BY d.endpoint_id, d.next_attempt_at LIMIT 1)
        FROM queued q WHERE q.id IS NOT NULL
    ), ready AS (
        SELECT e.id, o.oldest,
               LEAST(COALESCE(mine.n, per_endpoint), cap.n - busy.n,
                     CASE WHEN cluster_limits
                          THEN COALESCE(NULLIF(e.throttle_rate, 0), cap.n)
                          ELSE cap.n END) AS room
        FROM queued q
        CROSS JOIN LATERAL (SELECT * FROM endpoints WHERE id = q.id OFFSET 0) e
        CROSS JOIN LATERAL (
            SELECT LEAST(ceiling, COALESCE(e.max_concurrency, ceiling)) AS n
        ) cap
        LEFT JOIN LATERAL (
            SELECT r.n FROM unnest(room_ids, room_n) r(id, n) WHERE r.id = e.id LIMIT 1
        ) mine ON true
        CROSS JOIN LATERAL (
            SELECT MIN(d.next_attempt_at) AS oldest FROM deliveries d
            WHERE d.endpoint_id = e.id AND d.next_attempt_at IS NOT NULL
        ) o
        CROSS JOIN LATERAL (
            SELECT count(*) AS n FROM deliveries f
            WHERE cluster_limits AND f.endpoint_id = e.id AND f.status = 3
              AND f.next_attempt_at > now_ms
        ) busy
        WHERE NOT e.disabled AND COALESCE(mine.n, per_endpoint) > 0 AND o.oldest <= now_ms
          AND busy.n < cap.n
          AND (NOT cluster_limits OR COALESCE(e.next_window_at, 0) <= now_ms)
        ORDER BY o.oldest
        LIMIT most
    ), chosen AS (
        SELECT p.message_id, p.endpoint_id, p.next_attempt_at AS due FROM ready r
        CROSS JOIN LATERAL (
            SELECT d.message_id, d.endpoint_id, d.next_attempt_at FROM deliveries d
            WHERE d.endpoint_id = r.id AND d.next_attempt_at IS NOT NULL
              AND d.next_attempt_at <= now_ms
            ORDER BY d.next_attempt_at
            LIMIT LEAST(r.room, most)
            FOR UPDATE SKIP LOCKED
        ) p
        ORDER BY p.next_attempt_at
        LIMIT most
    ), claimed AS (
        UPDATE deliveries d SET status = 3, next_attempt_at = lease_until, updated_at = now_ms
        FROM chosen c WHERE d.message_id = c.message_id AND d.endpoint_id = c.endpoint_id
        RETURNING d AS delivery, c.due
    ), windows AS (
        UPDATE endpoints e
        SET next_window_at = now_ms + (c.n * 1000 + e.throttle_rate - 1) / e.throttle_rate
        FROM (SELECT (delivery).endpoint_id, count(*) AS n FROM claimed GROUP BY 1) c
        WHERE cluster_limits AND e.id = c.endpoint_id AND e.throttle_rate > 0
    )
    SELECT c.delivery, m, e, c.due
    FROM claimed c
    JOIN messages m ON m.id = (c.delivery).message_id
    JOIN endpoints e ON e.id = (c.delivery).endpoint_id;
END
$$;

-- As in v10, but an endpoint's own `max_concurrency` caps what is handed over too.
CREATE OR REPLACE FUNCTION publish_batch(
    message_ids TEXT[], app_ids TEXT[], event_types TEXT[], event_ids TEXT[], channels TEXT[],
    payloads BYTEA[], created BIGINT[],
    delivery_messages TEXT[], delivery_endpoints TEXT[], delivery_due BIGINT[],
    delivery_leases BIGINT[],
    now_ms BIGINT, per_endpoint BIGINT, cluster_limits BOOLEAN)
RETURNS TABLE (written_id TEXT, claimed_endpoint TEXT)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    IF cluster_limits AND EXISTS (SELECT FROM unnest(delivery_leases) l WHERE l IS NOT NULL) THEN
        PERFORM pg_advisory_xact_lock(448546171748);
    END IF;
    -- `written`: the messages, skipping any whose eventId is taken. `routed`: the deliveries of
    -- those written. `room`: for each endpoint asked for, how many it may still take. `decided`:
    -- the first deliveries asked for, within that room, go `sending` (3), the rest pending (1).
    RETURN QUERY
    WITH written AS (
        INSERT INTO messages (id, app_id, event_type, event_id, channels, payload, created_at)
        SELECT * FROM UNNEST(message_ids, app_ids, event_types, event_ids, channels, payloads,
                             created)
        ON CONFLICT (app_id, event_id) DO NOTHING
        RETURNING id
    ), routed AS (
        SELECT r.* FROM UNNEST(delivery_messages, delivery_endpoints, delivery_due,
                               delivery_leases) WITH ORDINALITY
            AS r(message_id, endpoint_id, due, lease, ord)
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
        SELECT r.message_id, r.endpoint_id, r.due,
               CASE WHEN r.lease IS NOT NULL
                         AND row_number() OVER (PARTITION BY r.endpoint_id, r.lease IS NULL
                                                ORDER BY r.ord) <= COALESCE(o.n, 0)
                    THEN r.lease END AS lease
        FROM routed r LEFT JOIN room o ON o.id = r.endpoint_id
    ), inserted AS (
        INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
                                next_attempt_at, updated_at)
        SELECT d.message_id, d.endpoint_id, CASE WHEN d.lease IS NULL THEN 1 ELSE 3 END, 0,
               COALESCE(d.lease, d.due), d.due
        FROM decided d
        RETURNING deliveries.message_id, deliveries.endpoint_id, deliveries.status
    )
    SELECT w.id, NULL::TEXT FROM written w
    UNION ALL
    SELECT i.message_id, i.endpoint_id FROM inserted i WHERE i.status = 3;
END
$$;
