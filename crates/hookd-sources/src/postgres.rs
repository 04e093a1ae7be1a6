//! An outbox table in a producer's PostgreSQL database: its DDL, and the relay's SQL.
//!
//! A trigger on the table sends `NOTIFY hookd_outbox` at each commit that inserted rows
//! (PostgreSQL delivers notifications only at commit), so a relay wakes at once; it also polls
//! in case a notification was lost.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use sqlx::{Connection as _, PgConnection};
use tokio::sync::Notify;

use crate::pass::{Backlog, Contract, HoldInner, Outcome, Taken, not_installed};
use crate::{CHANNEL, SourceError};
use hookd_store::OutboxColumns;

/// `hookd outbox install` on PostgreSQL, in one transaction. `{table_id}` is filled in.
pub const INSTALL: &str = r#"
CREATE TABLE IF NOT EXISTS hookd_outbox (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app          TEXT,
    event_type   TEXT NOT NULL,
    payload      JSON NOT NULL,
    event_id     TEXT,
    channels     TEXT[],
    ordering_key TEXT,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    error        TEXT,
    failed_at    TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS hookd_outbox_waiting ON hookd_outbox (id) WHERE failed_at IS NULL;
CREATE TABLE IF NOT EXISTS hookd_outbox_contract (
    version  INTEGER NOT NULL,
    table_id TEXT NOT NULL
);
INSERT INTO hookd_outbox_contract (version, table_id)
    SELECT 1, '{table_id}' WHERE NOT EXISTS (SELECT 1 FROM hookd_outbox_contract);
CREATE OR REPLACE FUNCTION hookd_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hookd_outbox', '');
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS hookd_outbox_notify ON hookd_outbox;
CREATE TRIGGER hookd_outbox_notify AFTER INSERT OR UPDATE OF failed_at ON hookd_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION hookd_outbox_notify();
COMMENT ON TABLE hookd_outbox IS 'hookd outbox source, contract v1: INSERT (app, event_type, payload[, event_id, channels, ordering_key]) in your transaction; hookd relays each committed row once. See docs/outbox.md.';
"#;

/// The grants a producer role and hookd's relay role need, for `install` to print; the roles
/// come quoted ([`crate::install::postgres_role`]).
pub fn grants(producer: &str, relay: &str) -> String {
    format!(
        "GRANT INSERT ON hookd_outbox TO {producer};\n\
         GRANT SELECT (id) ON hookd_outbox TO {producer};  -- only for INSERT … RETURNING id\n\
         GRANT SELECT, UPDATE, DELETE ON hookd_outbox TO {relay};\n\
         GRANT SELECT, UPDATE ON hookd_outbox_contract TO {relay};\n\
         -- and USAGE on the table's schema to both, if it is not `public`"
    )
}

/// An outbox table on PostgreSQL: a small pool of its own, and the URL to listen with.
pub struct Source {
    pool: PgPool,
    url: String,
}

impl Source {
    pub fn new(url: &str) -> Result<Self, SourceError> {
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy(url)?;
        Ok(Self {
            pool,
            url: url.to_owned(),
        })
    }

    pub async fn take(&self, limit: usize) -> Result<Option<Taken>, SourceError> {
        let mut tx = self.pool.begin().await?;
        let (contract, ordered) = contract(&mut tx).await?;
        let rows: Vec<OutboxColumns> = sqlx::query_as(
            "SELECT id, app, event_type, payload::text, event_id, to_json(channels)::text,
                        ordering_key
                 FROM hookd_outbox WHERE failed_at IS NULL AND ($2 OR ordering_key IS NULL)
                 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED",
        )
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(ordered)
        .fetch_all(&mut *tx)
        .await?;
        Ok(Taken::of(contract, rows, HoldInner::Postgres(tx)))
    }

    pub async fn backlog(&self) -> Result<Backlog, SourceError> {
        let (waiting, failed, oldest): (i64, i64, Option<f64>) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE failed_at IS NULL),
                    count(*) FILTER (WHERE failed_at IS NOT NULL),
                    EXTRACT(EPOCH FROM now() - min(created_at) FILTER (WHERE failed_at IS NULL))::float8
             FROM hookd_outbox",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(missing_table)?;
        Ok(Backlog {
            waiting: waiting.unsigned_abs(),
            failed: failed.unsigned_abs(),
            oldest: Duration::from_secs_f64(oldest.unwrap_or(0.0).max(0.0)),
        })
    }

    /// Listens on a connection of its own, reconnecting after any loss; every (re)connection
    /// wakes the relay once, for commits made while nobody listened.
    pub fn watch(&self, wake: Arc<Notify>) {
        let url = self.url.clone();
        tokio::spawn(async move {
            loop {
                if let Ok(mut listener) = PgListener::connect(&url).await
                    && listener.listen(CHANNEL).await.is_ok()
                {
                    wake.notify_one();
                    while let Ok(signal) = listener.try_recv().await {
                        // `None`: the connection was lost and is being re-established.
                        let _ = signal;
                        wake.notify_one();
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }
}

/// Reads the contract row, and whether this pass holds its lock (so may take keyed rows).
async fn contract(tx: &mut PgConnection) -> Result<(Contract, bool), SourceError> {
    let (version, table_id, ordered): (i32, String, bool) = sqlx::query_as(
        "WITH held AS (SELECT 1 FROM hookd_outbox_contract FOR UPDATE SKIP LOCKED)
         SELECT version, table_id, EXISTS (SELECT 1 FROM held) FROM hookd_outbox_contract",
    )
    .fetch_optional(&mut *tx)
    .await
    .map_err(missing_table)?
    .ok_or_else(|| not_installed(SourceError::Database(String::new()), true))?;
    let contract = Contract {
        version: version.into(),
        table_id,
    }
    .check()?;
    Ok((contract, ordered))
}

pub async fn settle(
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
    outcome: &Outcome,
) -> Result<(), SourceError> {
    sqlx::query("DELETE FROM hookd_outbox WHERE id = ANY($1)")
        .bind(&outcome.published)
        .execute(&mut *tx)
        .await?;
    if !outcome.refused.is_empty() {
        let (ids, errors): (Vec<i64>, Vec<&str>) = outcome
            .refused
            .iter()
            .map(|(id, why)| (*id, why.as_str()))
            .unzip();
        sqlx::query(
            "UPDATE hookd_outbox o SET error = f.error, failed_at = now()
             FROM UNNEST($1::bigint[], $2::text[]) AS f(id, error) WHERE o.id = f.id",
        )
        .bind(ids)
        .bind(errors)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Installs the table on `url` with identity `table_id`; returns whether it was new.
pub async fn install(url: &str, table_id: &str) -> Result<bool, SourceError> {
    let mut conn = PgConnection::connect(url).await?;
    let mut tx = conn.begin().await?;
    let existed: bool = sqlx::query_scalar("SELECT to_regclass('hookd_outbox') IS NOT NULL")
        .fetch_one(&mut *tx)
        .await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(INSTALL.replace("{table_id}", table_id)))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(!existed)
}

/// `undefined_table` as [`SourceError::NotInstalled`].
fn missing_table(error: sqlx::Error) -> SourceError {
    let missing = error
        .as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| code == "42P01");
    not_installed(error.into(), missing)
}
