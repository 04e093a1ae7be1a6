//! The PostgreSQL functions hookd calls (`claim_due`, `publish_batch`, `record_batch`,
//! `outbox_notify`, `event_id_spent`, `deliveries_in_order`, `attempts_follow_deliveries`,
//! `lock_parents`): one current definition each, in `migrations/postgres-functions/`,
//! applied after the numbered migrations whenever a process connects.
//!
//! A numbered migration is frozen once applied, so a function defined in migrations is defined
//! again by every migration that changes it, and what runs is whichever came last. Here each
//! function has one file; its first line numbers the definition, and `function_definitions`
//! records the number in place, so a process of an older version (during a rolling upgrade)
//! never replaces a newer definition with its own (the folder's README.md has the rules).
//!
//! `plans` (tests only) checks that what these functions and the hot writes keep prepared
//! reads every row by key.

use sqlx::{PgPool, Postgres, Transaction};

use crate::StoreError;

#[cfg(test)]
mod plans;

/// Each function's file.
const FUNCTIONS: [&str; 8] = [
    include_str!("../../migrations/postgres-functions/claim_due.sql"),
    include_str!("../../migrations/postgres-functions/publish_batch.sql"),
    include_str!("../../migrations/postgres-functions/record_batch.sql"),
    include_str!("../../migrations/postgres-functions/outbox_notify.sql"),
    include_str!("../../migrations/postgres-functions/event_id_spent.sql"),
    include_str!("../../migrations/postgres-functions/deliveries_in_order.sql"),
    include_str!("../../migrations/postgres-functions/attempts_follow_deliveries.sql"),
    include_str!("../../migrations/postgres-functions/lock_parents.sql"),
];

/// Serializes processes applying definitions at once (concurrent `CREATE OR REPLACE` of one
/// function fails with "tuple concurrently updated").
const LOCK: i64 = 0x686f_6f6b_6466_6e73;

/// A function's file: its name and definition number (from the first line), and its SQL.
#[derive(Debug, PartialEq)]
struct Definition<'a> {
    name: &'a str,
    number: i64,
    sql: &'a str,
}

impl<'a> Definition<'a> {
    /// Reads the first line, `-- hookd function NAME, definition N.`
    fn parse(sql: &'a str) -> Option<Self> {
        let header = sql.lines().next()?.strip_prefix("-- hookd function ")?;
        let (name, number) = header.split_once(", definition ")?;
        let number = number.strip_suffix('.')?.parse().ok()?;
        Some(Self { name, number, sql })
    }
}

/// Applies each function whose definition here is newer than the one in place (or that has
/// none), in one transaction, and records the numbers.
pub async fn apply(pool: &PgPool, now_ms: i64) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(LOCK)
        .execute(&mut *tx)
        .await?;
    for sql in FUNCTIONS {
        let definition = Definition::parse(sql).expect("each function file has its header line");
        apply_one(&mut tx, &definition, now_ms).await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn apply_one(
    tx: &mut Transaction<'_, Postgres>,
    definition: &Definition<'_>,
    now_ms: i64,
) -> Result<(), StoreError> {
    let in_place: Option<i64> =
        sqlx::query_scalar("SELECT definition FROM function_definitions WHERE name = $1")
            .bind(definition.name)
            .fetch_optional(&mut **tx)
            .await?;
    if in_place.is_some_and(|number| number >= definition.number) {
        return Ok(());
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(definition.sql))
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "INSERT INTO function_definitions (name, definition, applied_at) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE SET definition = $2, applied_at = $3",
    )
    .bind(definition.name)
    .bind(definition.number)
    .bind(now_ms)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Definition, FUNCTIONS};

    #[test]
    fn each_file_is_numbered_and_defines_the_function_it_names() {
        for sql in FUNCTIONS {
            let definition = Definition::parse(sql)
                .unwrap_or_else(|| panic!("no '-- hookd function NAME, definition N.' in:\n{sql}"));
            assert!(definition.number >= 1, "{}", definition.name);
            assert!(
                sql.contains(&format!("CREATE OR REPLACE FUNCTION {}(", definition.name)),
                "{} defines another function",
                definition.name
            );
        }
    }
}
