-- hookd function record_batch, definition 3.
-- Records a batch of finished attempts in one call and one transaction: locks the endpoints,
-- then the deliveries, each in key order (as deleting an endpoint does), then their ordering
-- keys, writes the attempts in the order they were made and moves each delivery still
-- `sending` under its lease, then the endpoints' failure streaks and slow-downs where they
-- change. Answers, per attempt: whether it was logged, whether its delivery moved, and when
-- its endpoint's failure streak began.
CREATE OR REPLACE FUNCTION record_batch(
    message_ids TEXT[], endpoint_ids TEXT[], statuses BIGINT[], attempt_counts BIGINT[],
    next_attempts BIGINT[], updated BIGINT[],
    attempt_ids TEXT[], urls TEXT[], response_codes BIGINT[], responses TEXT[], heads TEXT[],
    durations BIGINT[], attempt_statuses BIGINT[], triggers BIGINT[], created BIGINT[],
    leases BIGINT[], holds BIGINT[],
    lock_endpoints TEXT[], lock_delivery_endpoints TEXT[], lock_delivery_messages TEXT[],
    sending BIGINT, success BIGINT, set_from INT)
RETURNS TABLE (was_logged BOOLEAN, was_moved BOOLEAN, streak_since BIGINT)
-- Every statement keeps its generic plan from the first call on a connection, made perhaps on
-- empty tables: with joins by hash or merge and whole-table scans priced out, each joins the
-- arrays to the tables by key, however large the tables grow.
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan SET enable_hashjoin = off SET enable_mergejoin = off
SET enable_seqscan = off AS $$
DECLARE
    n INT := cardinality(message_ids);
    logged BOOLEAN[] := array_fill(false, ARRAY[n]);
    moved BOOLEAN[] := array_fill(false, ARRAY[n]);
    since BIGINT[] := array_fill(NULL::BIGINT, ARRAY[n]);
    befores BIGINT[];
    ep TEXT;
    before BIGINT;
    after BIGINT;
    broken BOOLEAN;
    hold BIGINT;
    stored BIGINT;
    did_move BOOLEAN;
    did_log BOOLEAN;
    key_endpoints TEXT[];
    keys TEXT[];
    moved_ords INT[];
    moved_at INT;
BEGIN
    -- The function scan is the outer side of each nested loop: rows are locked in array order.
    SELECT array_agg(e.failing_since ORDER BY k.ord) INTO befores
    FROM unnest(lock_endpoints) WITH ORDINALITY k(id, ord)
    LEFT JOIN LATERAL (SELECT failing_since FROM endpoints WHERE id = k.id FOR KEY SHARE) e
        ON true;
    -- Reading their ordering keys as they are locked.
    SELECT array_agg(k.endpoint_id) FILTER (WHERE locked.ordering_key IS NOT NULL),
           array_agg(locked.ordering_key) FILTER (WHERE locked.ordering_key IS NOT NULL)
    INTO key_endpoints, keys
    FROM unnest(lock_delivery_endpoints, lock_delivery_messages) k(endpoint_id, message_id)
    CROSS JOIN LATERAL (SELECT d.ordering_key FROM deliveries d
        WHERE d.endpoint_id = k.endpoint_id AND d.message_id = k.message_id
        FOR NO KEY UPDATE) locked;
    -- Then the ordering locks of the ordered ones, before any settles and queues the next of
    -- its key, in the order publishes take them in (see deliveries_in_order.sql).
    IF key_endpoints IS NOT NULL THEN
        PERFORM lock_ordering_keys(key_endpoints, keys);
    END IF;

    IF n >= set_from AND cardinality(lock_delivery_messages) = n THEN
        -- Each delivery once: one statement for all, which costs less than a statement per
        -- attempt from two attempts up. The deliveries are locked, so those found now are
        -- there until the commit: their attempts are logged.
        SELECT array_agg(EXISTS (SELECT FROM deliveries d
                WHERE d.message_id = k.message_id AND d.endpoint_id = k.endpoint_id)
            ORDER BY k.ord)
        INTO logged
        FROM unnest(message_ids, endpoint_ids) WITH ORDINALITY k(message_id, endpoint_id, ord);
        WITH input AS (
            SELECT * FROM unnest(message_ids, endpoint_ids, statuses, attempt_counts,
                                 next_attempts, updated, attempt_ids, urls, response_codes,
                                 responses, heads, durations, attempt_statuses, triggers,
                                 created, leases) WITH ORDINALITY
            AS i(message_id, endpoint_id, status, attempt_count, next_attempt_at, updated_at,
                 attempt_id, url, response_status_code, response, response_head,
                 response_duration_ms, attempt_status, trigger_type, created_at, lease, ord)
        ), moving AS (
            UPDATE deliveries d SET status = i.status, attempt_count = i.attempt_count,
                next_attempt_at = i.next_attempt_at, updated_at = i.updated_at, manual = false
            FROM input i
            WHERE d.message_id = i.message_id AND d.endpoint_id = i.endpoint_id
              AND (i.lease IS NULL OR (d.status = sending AND d.next_attempt_at = i.lease))
            RETURNING i.ord::INT
        ), logging AS (
            INSERT INTO attempts (id, message_id, endpoint_id, url, response_status_code,
                response, response_head, response_duration_ms, status, trigger_type,
                created_at)
            SELECT i.attempt_id, i.message_id, i.endpoint_id, i.url, i.response_status_code,
                i.response, i.response_head, i.response_duration_ms, i.attempt_status,
                i.trigger_type, i.created_at
            FROM input i WHERE logged[i.ord]
        )
        SELECT array_agg(moving.ord) INTO moved_ords FROM moving;
        FOREACH moved_at IN ARRAY COALESCE(moved_ords, '{}') LOOP
            moved[moved_at] := true;
        END LOOP;
    ELSE
        -- One statement per attempt, each an executor's start but nothing planned. A delivery
        -- twice in a batch (its lease ran out and it was claimed again) is met in the order its
        -- attempts were made, the second seeing the first's move.
        FOR i IN 1 .. n LOOP
            WITH moving AS (
                UPDATE deliveries d SET status = statuses[i], attempt_count = attempt_counts[i],
                    next_attempt_at = next_attempts[i], updated_at = updated[i], manual = false
                WHERE d.message_id = message_ids[i] AND d.endpoint_id = endpoint_ids[i]
                  AND (leases[i] IS NULL
                       OR (d.status = sending AND d.next_attempt_at = leases[i]))
                RETURNING 1
            ), logging AS (
                INSERT INTO attempts (id, message_id, endpoint_id, url, response_status_code,
                    response, response_head, response_duration_ms, status, trigger_type,
                    created_at)
                SELECT attempt_ids[i], message_ids[i], endpoint_ids[i], urls[i],
                    response_codes[i], responses[i], heads[i], durations[i],
                    attempt_statuses[i], triggers[i], created[i]
                WHERE EXISTS (SELECT FROM deliveries d
                    WHERE d.message_id = message_ids[i] AND d.endpoint_id = endpoint_ids[i])
                RETURNING 1
            )
            SELECT EXISTS (SELECT FROM moving), EXISTS (SELECT FROM logging)
            INTO did_move, did_log;
            moved[i] := did_move;
            logged[i] := did_log;
        END LOOP;
    END IF;

    -- Each endpoint's failure streak through its moved attempts (a success ends it, a failure
    -- starts one unless started), and the latest slow-down its logged attempts asked for.
    FOR j IN 1 .. cardinality(lock_endpoints) LOOP
        ep := lock_endpoints[j];
        before := befores[j];
        after := before;
        broken := false;
        hold := NULL;
        FOR i IN 1 .. n LOOP
            CONTINUE WHEN endpoint_ids[i] <> ep;
            IF logged[i] AND holds[i] IS NOT NULL THEN
                hold := GREATEST(hold, holds[i]);
            END IF;
            CONTINUE WHEN NOT moved[i];
            IF attempt_statuses[i] = success THEN
                broken := true;
                after := NULL;
            ELSE
                after := COALESCE(after, created[i]);
                since[i] := after;
            END IF;
        END LOOP;
        CONTINUE WHEN after IS NOT DISTINCT FROM before AND hold IS NULL;
        -- Another process may have started the streak since it was read: without a success
        -- here, the earlier start is kept, and answered.
        UPDATE endpoints e SET
            failing_since = CASE WHEN after IS NOT DISTINCT FROM before THEN e.failing_since
                                 WHEN broken THEN after
                                 ELSE COALESCE(e.failing_since, after) END,
            next_window_at = CASE WHEN hold IS NULL THEN e.next_window_at
                                  ELSE GREATEST(COALESCE(e.next_window_at, 0), hold) END
        WHERE e.id = ep
        RETURNING e.failing_since INTO stored;
        CONTINUE WHEN after IS NOT DISTINCT FROM before OR stored IS NULL;
        -- The batch's last streak is the one stored; those it ended keep their own start.
        FOR i IN 1 .. n LOOP
            IF endpoint_ids[i] = ep AND since[i] = after THEN
                since[i] := stored;
            END IF;
        END LOOP;
    END LOOP;

    RETURN QUERY SELECT * FROM unnest(logged, moved, since);
END
$$;
