//! The generic plans of the prepared statements that read tables through arrays.
//!
//! PostgreSQL runs a kept statement with a generic plan once five executions have used it,
//! and keeps that plan while the table's statistics stand still. Planned on a new database, a
//! join of arrays to a table is a hash join over a sequential scan, which would read every row of
//! the table on every batch after, however large it grew. These statements are written so that
//! even that first generic plan reads only the rows the arrays name, by key. A statement with
//! no such form is planned for each batch instead, and must not be kept prepared.
//!
//! `record_batch` keeps generic plans for the statement it writes a batch with and for the
//! statements it writes a batch attempt by attempt with (a delivery twice in it), with joins
//! by hash and merge and whole-table scans priced out; both ways must record the same.
//! `claim_due` (migration 0012) keeps one, made at its first claim and again after an
//! ANALYZE: made on tables of a row or beside a large backlog, it must read only the endpoints
//! with work and their rows, by key.
//! The ordering triggers (`deliveries_in_order`) run once per ordered message: the key they
//! probe must be looked up in the keys' own indexes, never filtered from an endpoint's rows.
//! The searches for deliveries not delivered (recover, an endpoint's list by status) repeat
//! the partial status index's condition: a generic plan cannot tell that a status parameter
//! meets it, and would filter the endpoint's every delivery instead.

use hookd_core::model::{Attempt, Delivery, DeliveryStatus, TriggerType};
use hookd_core::{AttemptId, EndpointId, MessageId, Timestamp};
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection, Row};

use crate::postgres::PgStore;
use crate::testing::fresh_postgres;
use crate::{AttemptRecord, Recorded};

/// The generic plan of `sql` (with `params` parameters) on `conn`, one line per node.
async fn generic_plan(conn: &mut PgConnection, sql: &str, params: usize) -> String {
    conn.execute("DEALLOCATE ALL").await.unwrap();
    conn.execute(AssertSqlSafe(format!("PREPARE statement AS {sql}")))
        .await
        .unwrap();
    let nulls = vec!["NULL"; params].join(", ");
    let explain = format!("EXPLAIN EXECUTE statement({nulls})");
    let rows = conn.fetch_all(AssertSqlSafe(explain)).await.unwrap();
    rows.iter()
        .map(|row| row.get::<String, _>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn array_statements_read_tables_by_key_even_when_first_planned_on_empty_tables() {
    let Some((url, _db)) = fresh_postgres("postgres::plans").await else {
        return;
    };
    PgStore::connect(&url).await.expect("migrates");
    let mut conn = PgConnection::connect(&url).await.unwrap();
    conn.execute("SET search_path = hookd; SET plan_cache_mode = force_generic_plan")
        .await
        .unwrap();
    let statements = [
        (
            "publish: subscribers",
            crate::postgres::publisher::SUBSCRIBERS.as_str(),
            1,
        ),
        (
            "publish: subscribers' filters",
            crate::postgres::publisher::SUBSCRIBER_FILTERS.as_str(),
            1,
        ),
    ];
    for (name, sql, params) in statements {
        let plan = generic_plan(&mut conn, sql, params).await;
        assert!(
            !plan.contains("Seq Scan") && plan.contains("Index"),
            "{name} reads a table whole:\n{plan}"
        );
    }
}

#[tokio::test]
async fn searches_for_deliveries_not_delivered_use_their_partial_index() {
    let Some((url, _db)) = fresh_postgres("postgres::plans_status").await else {
        return;
    };
    PgStore::connect(&url).await.expect("migrates");
    let mut conn = PgConnection::connect(&url).await.unwrap();
    conn.execute(
        "SET search_path = hookd; SET plan_cache_mode = force_generic_plan;
         SET enable_seqscan = off",
    )
    .await
    .unwrap();
    let endpoint = EndpointId::from_stored("ep_1".into());
    // The first page of the endpoint's deliveries in `status`, and its parameter count.
    let endpoint_list = |status| {
        let query = crate::sql::messages::endpoint_first_page(
            crate::sql::Dialect::Postgres,
            &endpoint,
            status,
        );
        (query.sql, query.args.len())
    };
    let (failed, failed_params) = endpoint_list(DeliveryStatus::Fail);
    for (sql, params) in [
        (failed.as_str(), failed_params),
        (&crate::postgres::recover::RECOVER, 6),
    ] {
        let plan = generic_plan(&mut conn, sql, params).await;
        assert!(
            plan.contains("deliveries_by_endpoint_status"),
            "{sql}\n{plan}"
        );
    }
    // Delivered ones are not in it: an endpoint's delivered list walks its deliveries.
    let (delivered, params) = endpoint_list(DeliveryStatus::Success);
    let plan = generic_plan(&mut conn, &delivered, params).await;
    assert!(plan.contains("deliveries_by_endpoint "), "{plan}");
}

/// An attempt of message `msg` to endpoint `ep_1`, made at `at` under the lease ending at 3:
/// a success, or a failure that asked to be left alone for a second.
fn attempt(msg: &str, id: &str, at: i64, success: bool) -> AttemptRecord {
    let (message_id, endpoint_id) = (
        MessageId::from_stored(msg.into()),
        EndpointId::from_stored("ep_1".into()),
    );
    let later = Some(Timestamp::from_millis(at + 1_000));
    let (status, code, next_status, next) = match success {
        true => (DeliveryStatus::Success, 200, DeliveryStatus::Success, None),
        false => (DeliveryStatus::Fail, 503, DeliveryStatus::Pending, later),
    };
    AttemptRecord {
        attempt: Attempt {
            id: AttemptId::from_stored(id.into()),
            message_id: message_id.clone(),
            endpoint_id: endpoint_id.clone(),
            url: "https://example.com/hook".into(),
            response_status_code: code,
            response: String::new(),
            response_head: String::new(),
            response_duration_ms: 1,
            status,
            trigger_type: TriggerType::Scheduled,
            created_at: Timestamp::from_millis(at),
        },
        next: Delivery {
            message_id,
            endpoint_id,
            status: next_status,
            attempt_count: 1,
            next_attempt_at: next,
            updated_at: Timestamp::from_millis(at),
            ordering_key: None,
        },
        lease: Some(Timestamp::from_millis(3)),
        hold_until: next,
        events: Vec::new(),
    }
}

/// A store on a new database with endpoint `ep_1` and, for each of `messages`, a delivery to
/// it `sending` under the lease ending at 3.
async fn store_with_deliveries(test: &str, messages: &[&str]) -> Option<(PgStore, impl Drop)> {
    let (url, db) = fresh_postgres(test).await?;
    let store = PgStore::connect_pooled(&url, 1).await.expect("migrates");
    sqlx::raw_sql(
        "INSERT INTO applications (id, name, metadata, created_at, updated_at)
             VALUES ('app_1', 'a', '{}', 0, 0);
         INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers,
             secret, created_at, updated_at)
             VALUES ('ep_1', 'app_1', 'https://example.com/hook', '', false, '{}', '{}', 's', 0, 0);",
    )
    .execute(&store.pool)
    .await
    .unwrap();
    for msg in messages {
        sqlx::query(
            "INSERT INTO messages (id, app_id, event_type, created_at) VALUES ($1, 'app_1', 't', 0)",
        )
        .bind(msg)
        .execute(&store.pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
                 next_attempt_at, updated_at) VALUES ($1, 'ep_1', 3, 0, 3, 0)",
        )
        .bind(msg)
        .execute(&store.pool)
        .await
        .unwrap();
    }
    Some((store, db))
}

/// Every statement inside `record_batch` is kept with a generic plan (`force_generic_plan`),
/// made here on tables of a row or two: none may read a table whole, whether the batch is
/// written attempt by attempt or by one statement for all.
#[tokio::test]
async fn recording_reads_every_row_by_key_with_plans_made_on_empty_tables() {
    let written = |since| Recorded::Written {
        failing_since: Some(Timestamp::from_millis(since)),
    };
    // Attempt by attempt: the first moves the delivery and starts the endpoint's streak; the
    // second, stale, is only logged. Every statement of that path runs.
    let each = (
        "postgres::plans_record_each",
        [
            attempt("msg_1", "atmpt_1", 10, false),
            attempt("msg_1", "atmpt_2", 20, false),
        ],
        i32::MAX,
    );
    // One statement for both deliveries.
    let set = (
        "postgres::plans_record_set",
        [
            attempt("msg_1", "atmpt_1", 10, false),
            attempt("msg_2", "atmpt_2", 20, false),
        ],
        1,
    );
    let expected = [[written(10), Recorded::Stale], [written(10), written(10)]];
    for ((test, batch, set_from), expected) in [each, set].into_iter().zip(expected) {
        let Some((store, _db)) = store_with_deliveries(test, &["msg_1", "msg_2"]).await else {
            return;
        };
        let mut tx = store.pool.begin().await.unwrap();
        // This backend's counts not yet reported, the fixture's own scans among them: the
        // call's are the difference.
        let before = table_counts(&mut tx, SEQUENTIAL_SCANS).await;
        let batch: Vec<&AttemptRecord> = batch.iter().collect();
        let recorded = crate::postgres::record::call(&mut tx, &batch, set_from)
            .await
            .unwrap();
        assert_eq!(recorded, expected, "{test}");
        let scans = growth(&before, &table_counts(&mut tx, SEQUENTIAL_SCANS).await);
        assert!(
            scans.iter().all(|(_, n)| *n == 0),
            "{test}: recording scanned tables whole: {scans:?}"
        );
    }
}

/// Settling a key's head queues the next of its key (the trigger `deliveries_next_in_order`)
/// by probing that key alone, in the keys' own index, however many other keys wait on the
/// endpoint: the promotion runs once per ordered message.
#[tokio::test]
async fn settling_a_keys_head_reads_only_that_keys_rows() {
    let Some((store, _db)) = store_with_deliveries("postgres::plans_ordering", &[]).await else {
        return;
    };
    // 300 keys of two messages each: the first of each key queued, the second waiting.
    sqlx::raw_sql(
        "INSERT INTO messages (id, app_id, event_type, created_at, ordering_key)
             SELECT 'msg_' || lpad(n::text, 4, '0'), 'app_1', 't', n, 'key-' || (n % 300)
             FROM generate_series(0, 599) n;
         INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
                 next_attempt_at, updated_at, ordering_key)
             SELECT id, 'ep_1', 1, 0, created_at, created_at, ordering_key FROM messages
             ORDER BY id;",
    )
    .execute(&store.pool)
    .await
    .unwrap();
    let mut tx = store.pool.begin().await.unwrap();
    let before = table_counts(&mut tx, ROWS_READ).await;
    sqlx::query(
        "UPDATE deliveries SET status = 0, next_attempt_at = NULL, updated_at = 1000
         WHERE message_id = 'msg_0007' AND endpoint_id = 'ep_1'",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    let read = growth(&before, &table_counts(&mut tx, ROWS_READ).await);
    let next: Option<i64> =
        sqlx::query_scalar("SELECT next_attempt_at FROM deliveries WHERE message_id = 'msg_0307'")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    assert_eq!(next, Some(1000), "the next of key-7 is due");
    let deliveries = read
        .iter()
        .find(|(table, _)| table == "deliveries")
        .unwrap()
        .1;
    assert!(
        deliveries <= 10,
        "read {deliveries} delivery rows to settle one"
    );
}

/// What [`table_counts`] counts: sequential scans begun, or rows read by any scan.
const SEQUENTIAL_SCANS: &str = "seq_scan";
const ROWS_READ: &str = "COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0)";

/// `counted` (an expression over `pg_stat_xact_user_tables`) for each table a record or a
/// claim touches, as this backend has counted it and not yet reported.
async fn table_counts(conn: &mut PgConnection, counted: &str) -> Vec<(String, i64)> {
    let sql = format!(
        "SELECT relname::text, {counted} FROM pg_stat_xact_user_tables
         WHERE relname IN ('applications', 'endpoints', 'messages', 'deliveries', 'attempts')
         ORDER BY relname"
    );
    let counts: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(sql))
        .fetch_all(conn)
        .await
        .unwrap();
    assert_eq!(counts.len(), 5, "every table is counted: {counts:?}");
    counts
}

/// Each table's count in `after` less its count in `before`.
fn growth(before: &[(String, i64)], after: &[(String, i64)]) -> Vec<(String, i64)> {
    after
        .iter()
        .zip(before)
        .map(|((table, n), (_, m))| (table.clone(), n - m))
        .collect()
}

/// A batch of every kind of outcome, recorded by one statement for all and by one statement
/// per attempt, leaves the same rows and answers the same.
#[tokio::test]
async fn a_batch_written_at_once_or_attempt_by_attempt_records_the_same() {
    // m1 fails at 10, m2 succeeds at 15 (ending that streak), m3 fails at 20 (the streak
    // stored), m4's lease ran out (only logged), m9 was deleted (nothing written).
    let batch = [
        attempt("m3", "a3", 20, false),
        attempt("m1", "a1", 10, false),
        attempt("m4", "a4", 30, false),
        attempt("m2", "a2", 15, true),
        attempt("m9", "a9", 12, false),
    ];
    let made: Vec<&AttemptRecord> = [1, 4, 3, 0, 2].iter().map(|&i| &batch[i]).collect();
    let mut seen = Vec::new();
    for (test, set_from) in [
        ("postgres::record_set", 1),
        ("postgres::record_each", i32::MAX),
    ] {
        let Some((store, _db)) = store_with_deliveries(test, &["m1", "m2", "m3", "m4"]).await
        else {
            return;
        };
        sqlx::query(
            "UPDATE deliveries SET status = 1, next_attempt_at = 50 WHERE message_id = 'm4'",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let mut conn = store.pool.acquire().await.unwrap();
        let recorded = crate::postgres::record::call(&mut conn, &made, set_from)
            .await
            .unwrap();
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT concat_ws(' ', message_id, status, attempt_count, next_attempt_at, updated_at)
                 FROM deliveries
             UNION ALL SELECT concat_ws(' ', id, message_id, status, created_at) FROM attempts
             UNION ALL SELECT concat_ws(' ', id, failing_since, next_window_at) FROM endpoints
             ORDER BY 1",
        )
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        seen.push((recorded, rows));
    }
    let written = |since: Option<i64>| Recorded::Written {
        failing_since: since.map(Timestamp::from_millis),
    };
    assert_eq!(
        seen[0].0,
        [
            written(Some(10)),
            Recorded::Gone,
            written(None),
            written(Some(20)),
            Recorded::Stale
        ]
    );
    assert_eq!(seen[0], seen[1]);
}

/// `claim_due` keeps one generic plan per connection, here made while `ep_1` is the only
/// endpoint. With a thousand more endpoints, none with anything queued (one with a thousand
/// deliveries done), a claim of `ep_1`'s due delivery reads `ep_1`'s row and its delivery,
/// and no others: a claim's cost follows the endpoints with work, not every endpoint in the
/// database, nor the deliveries they are done with.
#[tokio::test]
async fn a_claim_reads_only_the_endpoints_with_queued_deliveries() {
    let Some((store, _db)) = store_with_deliveries("postgres::plans_claim", &["msg_1"]).await
    else {
        return;
    };
    let mut conn = store.pool.acquire().await.unwrap();
    // Planned now, on tables of a row each: the delivery is in flight, nothing is due.
    assert_eq!(claim(&mut conn, 1).await, 0);
    sqlx::raw_sql(
        "INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers,
             secret, created_at, updated_at)
         SELECT 'ep_idle_' || i, 'app_1', 'https://example.com/hook', '', false, '{}', '{}',
             's', 0, 0
         FROM generate_series(1, 1000) i;
         INSERT INTO messages (id, app_id, event_type, created_at)
         SELECT 'msg_done_' || i, 'app_1', 't', 0 FROM generate_series(1, 1000) i;
         INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count, updated_at)
         SELECT 'msg_done_' || i, 'ep_idle_1', 2, 1, 0 FROM generate_series(1, 1000) i;
         UPDATE deliveries SET status = 1, next_attempt_at = 5 WHERE message_id = 'msg_1';",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    claim_reads_by_key(&mut conn).await;
}

/// Claims `ep_1`'s one due delivery at 10 in a transaction of its own, and asserts that it read
/// no more than a few rows of any table to do so.
async fn claim_reads_by_key(conn: &mut PgConnection) {
    let mut tx = conn.begin().await.unwrap();
    let before = table_counts(&mut tx, ROWS_READ).await;
    assert_eq!(claim(&mut tx, 10).await, 1);
    let read = growth(&before, &table_counts(&mut tx, ROWS_READ).await);
    assert!(read.iter().all(|(_, n)| *n < 10), "the claim read {read:?}");
}

/// Deliveries `claim_due` takes at `now_ms`, at most 8, 4 an endpoint, under cluster limits.
async fn claim(conn: &mut PgConnection, now_ms: i64) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM claim_due($1, '{}', 8, 4, $1 + 90000, true)")
        .bind(now_ms)
        .fetch_one(conn)
        .await
        .unwrap()
}

/// `claim_due`'s plan made beside a backlog (an endpoint with 20,000 retries scheduled, the
/// tables analyzed) still reaches the deliveries it claims by key, not by hashing the table.
#[tokio::test]
async fn a_claim_planned_beside_a_large_backlog_reads_by_key() {
    let Some((store, _db)) = store_with_deliveries("postgres::plans_backlog", &["msg_1"]).await
    else {
        return;
    };
    let mut conn = store.pool.acquire().await.unwrap();
    sqlx::raw_sql(
        "INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers,
             secret, created_at, updated_at)
         VALUES ('ep_backlog', 'app_1', 'https://example.com/hook', '', false, '{}', '{}', 's',
             0, 0);
         INSERT INTO messages (id, app_id, event_type, created_at)
         SELECT 'msg_later_' || i, 'app_1', 't', 0 FROM generate_series(1, 20000) i;
         INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
             next_attempt_at, updated_at)
         SELECT 'msg_later_' || i, 'ep_backlog', 1, 1, 1000000 + i, 0
         FROM generate_series(1, 20000) i;
         UPDATE deliveries SET status = 1, next_attempt_at = 5 WHERE message_id = 'msg_1';
         ANALYZE endpoints, messages, deliveries;",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    claim_reads_by_key(&mut conn).await;
}
