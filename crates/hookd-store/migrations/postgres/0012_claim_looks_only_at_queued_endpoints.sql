-- hookd schema v12 (PostgreSQL): a claim's cost follows the work queued, not the size of
-- the tables.
--
-- `ready` probed every endpoint in the table twice (its oldest due delivery, its deliveries
-- in flight) to find the few with work: two index probes per endpoint however few had
-- anything queued, 0.7 s a claim with 50,000 endpoints. `queued` now steps through the
-- distinct endpoint ids of deliveries_endpoint_due, one probe each (a loose index scan, which
-- PostgreSQL does not make by itself; ordered as that index is, so no other index serves it),
-- and only those endpoints are probed further. A deployment has many more endpoints than
-- endpoints with work at any moment.
--
-- And the claim is planned with nested loops only. Its one generic plan per connection is
-- made at the first claim, or again after an ANALYZE: made beside a backlog of 400,000
-- deliveries, it joined the rows to claim to `deliveries` by hashing a sequential scan of the
-- whole table, 0.2 s a claim. Every read of a claim is a probe by key, and now planned as one.
-- Otherwise as in v9; the signature is unchanged, so processes of v11 call this one too.

CREATE OR REPLACE FUNCTION claim_due(now_ms BIGINT, skip_endpoints TEXT[], most BIGINT,
                          per_endpoint BIGINT, lease_until BIGINT, cluster_limits BOOLEAN)
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
    -- Endpoint by endpoint, never scanning a backlog: `queued` steps through the endpoints
    -- with deliveries queued (in flight or not), one probe each; `ready` finds each one's
    -- oldest due time with one probe of deliveries_endpoint_due and keeps the `most`
    -- endpoints waiting longest, with the room each has left (its cap less its deliveries in
    -- flight anywhere, one second of its rate at most); `chosen` takes that many of each one's
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
               LEAST(per_endpoint - busy.n,
                     CASE WHEN cluster_limits
                          THEN COALESCE(NULLIF(e.throttle_rate, 0), per_endpoint)
                          ELSE per_endpoint END) AS room
        FROM queued q
        CROSS JOIN LATERAL (SELECT * FROM endpoints WHERE id = q.id OFFSET 0) e
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
