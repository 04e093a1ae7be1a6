//! PostgreSQL backend (feature `postgres`): sqlx on a pool the caller may share with the rest
//! of the application. Claims use `FOR UPDATE SKIP LOCKED`, so several receiver processes can
//! work one inbox without taking the same row.

use sqlx::PgPool;

use crate::StoreError;
use crate::inbox::{Inbox, InboxOptions, Pending, Seen};
use crate::ordering::{Applied, VersionStore};
use crate::sql::{self, Table};

/// A PostgreSQL database holding inboxes and version tables.
#[derive(Debug, Clone)]
pub struct PgDb(PgPool);

impl PgDb {
    /// Connects a new pool to `url`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Ok(Self(PgPool::connect(url).await?))
    }

    /// Uses an existing pool.
    pub fn from_pool(pool: PgPool) -> Self {
        Self(pool)
    }

    /// The inbox in table `table` (created if missing), with `options`.
    pub async fn inbox(&self, table: &str, options: InboxOptions) -> Result<PgInbox, StoreError> {
        let table = Table::new(table)?;
        for ddl in sql::create_inbox(&table, "BYTEA") {
            sqlx::query(sqlx::AssertSqlSafe(ddl))
                .execute(&self.0)
                .await?;
        }
        Ok(PgInbox {
            pool: self.0.clone(),
            record: sql::record(&table),
            claim: sql::claim(&table, "FOR UPDATE SKIP LOCKED"),
            mark_processed: sql::mark_processed(&table, !options.keep_payloads.is_zero()),
            reprocess: sql::reprocess(&table),
            backlog: sql::backlog(&table),
            drop_payloads: sql::drop_payloads(&table),
            purge: sql::purge(&table),
            options,
        })
    }

    /// The version table `table` (created if missing).
    pub async fn versions(&self, table: &str) -> Result<PgVersions, StoreError> {
        let table = Table::new(table)?;
        sqlx::query(sqlx::AssertSqlSafe(sql::create_versions(&table)))
            .execute(&self.0)
            .await?;
        Ok(PgVersions {
            pool: self.0.clone(),
            apply: sql::apply(&table),
            get: sql::get(&table),
        })
    }
}

/// An [`Inbox`] in a PostgreSQL table.
#[derive(Debug, Clone)]
pub struct PgInbox {
    pool: PgPool,
    record: String,
    claim: String,
    mark_processed: String,
    reprocess: String,
    backlog: String,
    drop_payloads: String,
    purge: String,
    options: InboxOptions,
}

impl Inbox for PgInbox {
    async fn record(&self, webhook_id: &str, payload: &[u8]) -> Result<Seen, StoreError> {
        let inserted = sqlx::query(sqlx::AssertSqlSafe(self.record.as_str()))
            .bind(webhook_id)
            .bind(self.options.now_ms())
            .bind(payload)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(if inserted == 1 {
            Seen::New
        } else {
            Seen::Duplicate
        })
    }

    async fn claim(&self, limit: u32) -> Result<Vec<Pending>, StoreError> {
        let rows: Vec<(String, Option<Vec<u8>>, i64)> =
            sqlx::query_as(sqlx::AssertSqlSafe(self.claim.as_str()))
                .bind(self.options.lease_until_ms())
                .bind(self.options.now_ms())
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?;
        let mut claimed: Vec<Pending> = rows
            .into_iter()
            .map(|(webhook_id, payload, received_at)| Pending {
                webhook_id,
                payload: payload.unwrap_or_default(),
                received_at,
            })
            .collect();
        claimed.sort_by_key(|p| p.received_at);
        Ok(claimed)
    }

    async fn mark_processed(&self, webhook_id: &str) -> Result<(), StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(self.mark_processed.as_str()))
            .bind(webhook_id)
            .bind(self.options.now_ms())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn backlog(&self) -> Result<u64, StoreError> {
        let (count,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(self.backlog.as_str()))
            .fetch_one(&self.pool)
            .await?;
        Ok(count.unsigned_abs())
    }

    async fn reprocess(&self, webhook_id: &str) -> Result<bool, StoreError> {
        let changed = sqlx::query(sqlx::AssertSqlSafe(self.reprocess.as_str()))
            .bind(webhook_id)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(changed == 1)
    }

    async fn purge(&self) -> Result<u64, StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(self.drop_payloads.as_str()))
            .bind(self.options.drop_payloads_before_ms())
            .execute(&self.pool)
            .await?;
        Ok(sqlx::query(sqlx::AssertSqlSafe(self.purge.as_str()))
            .bind(self.options.purge_before_ms())
            .execute(&self.pool)
            .await?
            .rows_affected())
    }
}

/// A [`VersionStore`] in a PostgreSQL table.
#[derive(Debug, Clone)]
pub struct PgVersions {
    pool: PgPool,
    apply: String,
    get: String,
}

impl VersionStore for PgVersions {
    async fn apply(&self, key: &str, version: i64, state: &str) -> Result<Applied, StoreError> {
        let changed = sqlx::query(sqlx::AssertSqlSafe(self.apply.as_str()))
            .bind(key)
            .bind(version)
            .bind(state)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(if changed == 1 {
            Applied::Newer
        } else {
            Applied::Stale
        })
    }

    async fn get(&self, key: &str) -> Result<Option<(i64, String)>, StoreError> {
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(self.get.as_str()))
            .bind(key)
            .fetch_optional(&self.pool)
            .await?)
    }
}
