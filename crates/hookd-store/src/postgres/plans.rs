//! The generic plans of the prepared statements that read tables through arrays.
//!
//! PostgreSQL runs a kept statement with a generic plan once five executions have used it,
//! and keeps that plan while the table's statistics stand still. Planned on a new database, a
//! join of arrays to a table is a hash join over a sequential scan, which would read every row of
//! the table on every batch after, however large it grew. These statements are written so that
//! even that first generic plan reads only the rows the arrays name, by key.

use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection, Row};

use super::PgStore;
use crate::testing::fresh_postgres;

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
        ("publish: subscribers", super::publish::SUBSCRIBERS, 1),
    ];
    for (name, sql, params) in statements {
        let plan = generic_plan(&mut conn, sql, params).await;
        assert!(
            !plan.contains("Seq Scan") && plan.contains("Index"),
            "{name} reads a table whole:\n{plan}"
        );
    }
}
