-- hookd schema v9 (PostgreSQL): a claim locks no more rows than it may take, and is planned once.
--
-- `chosen` locked up to each ready endpoint's room (its cap less its deliveries in flight)
-- and only then kept the `most` due first. With many endpoints waiting, a claim of 8
-- deliveries locked up to 8 endpoints' room each (512 rows at the default cap of 64): every
-- lock a WAL record and a dirtied heap page, and rows the claim would not take held from the
-- claimers after it until its commit. No endpoint can give more than `most` to a claim, so
-- each one's probe now stops there.
--
-- And the claim's query keeps one plan per connection (plan_cache_mode, for this function
-- only). Left to choose, PostgreSQL's plan cache planned it again for about a quarter of all
-- claims, at 0.5 to 0.7 ms a plan on the 2-core benchmark machine: more than the query's own
-- 0.3 ms. Its generic plan probes the same indexes (every search is by endpoint, and the
-- in-flight count's `status = 3` is a literal for its partial index). Otherwise as in v8.

CREATE OR REPLACE FUNCTION claim_due(now_ms BIGINT, skip_endpoints TEXT[], most BIGINT,
                          per_endpoint BIGINT, lease_until BIGINT, cluster_limits BOOLEAN)
RETURNS TABLE (delivery deliveries, message messages, endpoint endpoints, due BIGINT)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    IF cluster_limits THEN
        PERFORM pg_advisory_xact_lock(448546171748);
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    -- Endpoint by endpoint, never scanning a backlog: `ready` finds each enabled endpoint's
    -- oldest due time with one probe of deliveries_endpoint_due and keeps the `most`
    -- endpoints waiting longest, with the room each has left (its cap less its deliveries in
    -- flight anywhere, one second of its rate at most); `chosen` takes that many of each one's
    -- oldest due rows, skipping rows another claimer holds locked; `windows` moves
    -- rate-limited endpoints' next window past the attempts just claimed.
    RETURN QUERY
    WITH ready AS (
        SELECT e.id, o.oldest,
               LEAST(per_endpoint - busy.n,
                     CASE WHEN cluster_limits
                          THEN COALESCE(NULLIF(e.throttle_rate, 0), per_endpoint)
                          ELSE per_endpoint END) AS room
        FROM endpoints e
        CROSS JOIN LATERAL (
            SELECT MIN(d.next_attempt_at) AS oldest FROM deliveries d
            WHERE d.endpoint_id = e.id AND d.next_attempt_at IS NOT NULL
        ) o
        CROSS JOIN LATERAL (
            SELECT count(*) AS n FROM deliveries f
            WHERE cluster_limits AND f.endpoint_id = e.id AND f.status = 3
              AND f.next_attempt_at > now_ms
        ) busy
        WHERE NOT e.disabled AND e.id <> ALL (skip_endpoints) AND o.oldest <= now_ms
          AND busy.n < per_endpoint
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
