//! An outbox table in a producer's MySQL or MariaDB database: its DDL, and the relay's SQL.
//!
//! The relay's sessions run at READ COMMITTED, where `FOR UPDATE` locks the rows it returns
//! and no gaps: under InnoDB's default REPEATABLE READ it would lock the gap after the last
//! row, and every producer's insert would wait for the relay. MySQL has no notifications, so
//! the relay polls with one indexed read.

use std::time::Duration;

use sqlx::mysql::{MySqlConnection, MySqlPool, MySqlPoolOptions};
use sqlx::{Connection as _, Executor as _, MySql, QueryBuilder};

use crate::SourceError;
use crate::pass::{Backlog, Contract, HoldInner, Outcome, Taken, not_installed};
use hookd_store::OutboxColumns;

/// `hookd outbox install` on MySQL/MariaDB, one statement at a time (MySQL commits DDL as it
/// goes). `payload` is text, not MySQL's `JSON` type, which would re-serialize it: receivers
/// get the bytes the producer wrote. `{table_id}` is filled in.
pub const INSTALL: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS hookd_outbox (
        id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        app          VARCHAR(256) NULL,
        event_type   VARCHAR(256) NOT NULL,
        payload      LONGTEXT NOT NULL CHECK (JSON_VALID(payload)),
        event_id     VARCHAR(256) NULL,
        channels     TEXT NULL CHECK (channels IS NULL OR JSON_VALID(channels)),
        ordering_key VARCHAR(256) NULL,
        created_at   TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
        error        TEXT NULL,
        failed_at    TIMESTAMP(3) NULL DEFAULT NULL,
        KEY hookd_outbox_waiting (failed_at, id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
      COMMENT='hookd outbox source, contract v1: see docs/outbox.md'",
    "CREATE TABLE IF NOT EXISTS hookd_outbox_contract (
        version  INT NOT NULL,
        table_id VARCHAR(64) NOT NULL,
        PRIMARY KEY (table_id)
    ) ENGINE=InnoDB",
    "INSERT INTO hookd_outbox_contract (version, table_id)
        SELECT 1, '{table_id}' FROM DUAL
        WHERE NOT EXISTS (SELECT 1 FROM hookd_outbox_contract)",
];

/// The grants a producer account and hookd's relay account need, for `install` to print; the
/// database and the accounts come quoted ([`crate::install::mysql_identifier`],
/// [`crate::install::mysql_account`]).
pub fn grants(database: &str, producer: &str, relay: &str) -> String {
    format!(
        "GRANT INSERT ON {database}.`hookd_outbox` TO {producer};\n\
         GRANT SELECT, UPDATE, DELETE ON {database}.`hookd_outbox` TO {relay};\n\
         GRANT SELECT, UPDATE ON {database}.`hookd_outbox_contract` TO {relay};"
    )
}

/// An outbox table on MySQL: a small pool of read-committed sessions.
pub struct Source {
    pool: MySqlPool,
}

impl Source {
    pub fn new(url: &str) -> Result<Self, SourceError> {
        let pool = MySqlPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(5))
            .after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .await?;
                    Ok(())
                })
            })
            .connect_lazy(&mysql_url(url))?;
        Ok(Self { pool })
    }

    pub async fn take(&self, limit: usize) -> Result<Option<Taken>, SourceError> {
        // One cheap read first: the relay polls, and most polls find nothing.
        let waiting: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM hookd_outbox WHERE failed_at IS NULL)",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(missing_table)?;
        if !waiting {
            return Ok(None);
        }
        let mut tx = self.pool.begin().await?;
        let (contract, ordered) = contract(&mut tx).await?;
        let rows = if ordered {
            take_all(&mut tx, limit).await?
        } else {
            take_unkeyed(&mut tx, limit).await?
        };
        Ok(Taken::of(contract, rows, HoldInner::MySql(tx)))
    }

    pub async fn backlog(&self) -> Result<Backlog, SourceError> {
        let (waiting, failed, oldest): (i64, i64, Option<i64>) = sqlx::query_as(
            "SELECT CAST(COALESCE(SUM(failed_at IS NULL), 0) AS SIGNED),
                    CAST(COALESCE(SUM(failed_at IS NOT NULL), 0) AS SIGNED),
                    TIMESTAMPDIFF(MICROSECOND,
                        MIN(CASE WHEN failed_at IS NULL THEN created_at END),
                        CURRENT_TIMESTAMP(3))
             FROM hookd_outbox",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(missing_table)?;
        Ok(Backlog {
            waiting: waiting.unsigned_abs(),
            failed: failed.unsigned_abs(),
            oldest: Duration::from_micros(oldest.unwrap_or(0).max(0).unsigned_abs()),
        })
    }
}

/// The columns a pass reads of each row, for `SELECT … FROM` the rows it takes.
const COLUMNS: &str = "SELECT id, app, event_type, payload, event_id, channels, ordering_key
     FROM ";

/// The oldest waiting rows nobody holds: what the relay holding the contract row takes.
async fn take_all(
    tx: &mut MySqlConnection,
    limit: usize,
) -> Result<Vec<OutboxColumns>, SourceError> {
    let sql = format!(
        "{COLUMNS}hookd_outbox WHERE failed_at IS NULL ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(u64::try_from(limit).unwrap_or(u64::MAX))
        .fetch_all(tx)
        .await?)
}

/// The oldest waiting rows without an ordering key that nobody holds: what the other relays
/// take. Found by a read that locks nothing, then locked by primary key (see [`push_rows_of`]): a
/// locking scan would lock every row it passes while it checks the key.
async fn take_unkeyed(
    tx: &mut MySqlConnection,
    limit: usize,
) -> Result<Vec<OutboxColumns>, SourceError> {
    let ids: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM hookd_outbox WHERE failed_at IS NULL AND ordering_key IS NULL
         ORDER BY id LIMIT ?",
    )
    .bind(u64::try_from(limit).unwrap_or(u64::MAX))
    .fetch_all(&mut *tx)
    .await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut select = QueryBuilder::<MySql>::new(COLUMNS);
    push_rows_of(&mut select, &ids);
    select.push(" WHERE failed_at IS NULL ORDER BY id FOR UPDATE SKIP LOCKED");
    Ok(select.build_query_as().fetch_all(tx).await?)
}

/// The outbox rows of `ids`, as a table to select or delete from: a derived table of the ids
/// (`wanted`) joined first (`STRAIGHT_JOIN`) to the outbox `o` by its primary key, so that
/// each row is found by key whatever the optimizer makes of the table's size. Given
/// `id IN (…)` naming a large share of the rows (a sixth, on MariaDB 10.11), the plan is a
/// scan of the whole table, and a locking scan locks every row it passes (a `DELETE` waits for
/// each): relays settling their own rows would then deadlock on each other's, and the relay
/// taking keyed rows would skip a keyed row so held and take the ones after it out of order.
fn push_rows_of(query: &mut QueryBuilder<MySql>, ids: &[i64]) {
    query.push("(");
    for (i, id) in ids.iter().enumerate() {
        query.push(if i == 0 {
            "SELECT "
        } else {
            " UNION ALL SELECT "
        });
        query.push_bind(*id);
        if i == 0 {
            query.push(" AS wanted");
        }
    }
    query.push(") ids STRAIGHT_JOIN hookd_outbox o FORCE INDEX (PRIMARY) ON o.id = ids.wanted");
}

/// Reads the contract row, and whether this pass holds its lock (so may take keyed rows).
async fn contract(tx: &mut MySqlConnection) -> Result<(Contract, bool), SourceError> {
    let (version, table_id): (i32, String) =
        sqlx::query_as("SELECT version, table_id FROM hookd_outbox_contract")
            .fetch_optional(&mut *tx)
            .await
            .map_err(missing_table)?
            .ok_or_else(|| not_installed(SourceError::Database(String::new()), true))?;
    let held: Option<i32> =
        sqlx::query_scalar("SELECT version FROM hookd_outbox_contract FOR UPDATE SKIP LOCKED")
            .fetch_optional(&mut *tx)
            .await?;
    let contract = Contract {
        version: version.into(),
        table_id,
    }
    .check()?;
    Ok((contract, held.is_some()))
}

pub async fn settle(
    mut tx: sqlx::Transaction<'static, MySql>,
    outcome: &Outcome,
) -> Result<(), SourceError> {
    if !outcome.published.is_empty() {
        let mut delete = QueryBuilder::<MySql>::new("DELETE o FROM ");
        push_rows_of(&mut delete, &outcome.published);
        delete.build().execute(&mut *tx).await?;
    }
    for (id, why) in &outcome.refused {
        sqlx::query(
            "UPDATE hookd_outbox SET error = ?, failed_at = CURRENT_TIMESTAMP(3) WHERE id = ?",
        )
        .bind(why)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Installs the table on `url` with identity `table_id`; returns whether it was new.
pub async fn install(url: &str, table_id: &str) -> Result<bool, SourceError> {
    let mut conn = MySqlConnection::connect(&mysql_url(url)).await?;
    let existed: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM information_schema.tables
                        WHERE table_schema = DATABASE() AND table_name = 'hookd_outbox')",
    )
    .fetch_one(&mut conn)
    .await?;
    for statement in INSTALL {
        conn.execute(sqlx::AssertSqlSafe(
            statement.replace("{table_id}", table_id),
        ))
        .await?;
    }
    conn.close().await?;
    Ok(!existed)
}

/// The database a URL names (for the printed grants).
pub async fn database(url: &str) -> Result<String, SourceError> {
    let mut conn = MySqlConnection::connect(&mysql_url(url)).await?;
    let name: Option<String> = sqlx::query_scalar("SELECT DATABASE()")
        .fetch_one(&mut conn)
        .await?;
    conn.close().await?;
    name.ok_or_else(|| SourceError::Config("the MySQL URL names no database".into()))
}

/// `mariadb://` as the `mysql://` the driver knows.
fn mysql_url(url: &str) -> String {
    match url.strip_prefix("mariadb://") {
        Some(rest) => format!("mysql://{rest}"),
        None => url.to_owned(),
    }
}

/// `ER_NO_SUCH_TABLE` as [`SourceError::NotInstalled`].
fn missing_table(error: sqlx::Error) -> SourceError {
    let missing = error
        .as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| code == "42S02");
    not_installed(error.into(), missing)
}
