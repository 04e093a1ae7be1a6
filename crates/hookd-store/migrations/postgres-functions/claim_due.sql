-- hookd function claim_due, definition 1.
-- Claims due deliveries for one engine, as `sending` under a lease until `lease_until`: of
-- each endpoint the engine already has work of, at most its room (`room_ids`, `room_n`; 0 skips
-- it), of any other at most `per_endpoint`, from the `most` endpoints waiting longest. With
-- `cluster_limits` an endpoint's deliveries in flight across every process never pass its
-- ceiling (`ceiling`, or the endpoint's own `max_concurrency` if lower), and rate-limited
-- endpoints' windows move past what it takes. Every read is a key lookup, so the generic plan it
-- keeps never scans a table whole.
CREATE OR REPLACE FUNCTION claim_due(now_ms BIGINT, room_ids TEXT[], room_n BIGINT[], most BIGINT,
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
