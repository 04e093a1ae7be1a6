//! The generic plans of the prepared statements that read tables through arrays.
//!
//! PostgreSQL runs a kept statement with a generic plan once five executions have used it,
//! and keeps that plan while the table's statistics stand still. Planned on a new database, a
//! join of arrays to a table is a hash join over a sequential scan, which would read every row of
//! the table on every batch after, however large it grew. These statements are written so that
//! even that first generic plan reads only the rows the arrays name, by key. A statement with
//! no such form is planned for each batch instead, and must not be kept prepared.

use hookd_core::model::{Attempt, Delivery, DeliveryStatus, TriggerType};
use hookd_core::{AttemptId, EndpointId, MessageId, Timestamp};
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection, Row};

use super::PgStore;
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
        ("record: lock endpoints", super::record::LOCK_ENDPOINTS, 1),
        ("record: lock deliveries", super::record::LOCK_DELIVERIES, 2),
        (
            "publish: subscribers",
            super::publish::SUBSCRIBERS.as_str(),
            1,
        ),
        (
            "publish: subscribers' filters",
            super::publish::SUBSCRIBER_FILTERS,
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

/// A successful attempt of a delivery that does not exist: recording it runs every statement
/// of a record batch but the streaks' (no streak changes) and writes nothing.
fn record_of_a_gone_delivery() -> AttemptRecord {
    let (message_id, endpoint_id) = (
        MessageId::new(Timestamp::from_millis(1)),
        EndpointId::new(Timestamp::from_millis(1)),
    );
    AttemptRecord {
        attempt: Attempt {
            id: AttemptId::new(Timestamp::from_millis(2)),
            message_id: message_id.clone(),
            endpoint_id: endpoint_id.clone(),
            url: "https://example.com/hook".into(),
            response_status_code: 200,
            response: String::new(),
            response_head: String::new(),
            response_duration_ms: 1,
            status: DeliveryStatus::Success,
            trigger_type: TriggerType::Scheduled,
            created_at: Timestamp::from_millis(2),
        },
        next: Delivery {
            message_id,
            endpoint_id,
            status: DeliveryStatus::Success,
            attempt_count: 1,
            next_attempt_at: None,
            updated_at: Timestamp::from_millis(2),
        },
        lease: Some(Timestamp::from_millis(3)),
        hold_until: None,
        events: Vec::new(),
    }
}

#[tokio::test]
async fn the_record_write_is_planned_for_each_batch_not_kept_prepared() {
    let Some((url, _db)) = fresh_postgres("postgres::plans_kept").await else {
        return;
    };
    // One connection: the statements it keeps are those the batch ran.
    let store = PgStore::connect_pooled(&url, 1).await.expect("migrates");
    let recorded = store
        .record_batch(&[record_of_a_gone_delivery()])
        .await
        .unwrap();
    assert_eq!(recorded, [Recorded::Gone]);
    let kept: Vec<String> = sqlx::query_scalar("SELECT statement FROM pg_prepared_statements")
        .fetch_all(&store.pool)
        .await
        .unwrap();
    assert!(
        kept.iter().any(|s| s == super::record::LOCK_DELIVERIES),
        "the batch's locks are kept prepared: {kept:?}"
    );
    assert!(
        !kept.iter().any(|s| s.contains("UPDATE deliveries")),
        "the record's write is kept prepared, so its generic plan could freeze: {kept:?}"
    );
}
