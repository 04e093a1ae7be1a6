//! Producers' databases for tests, here and in the crates above: a [`Producer`] of each kind
//! with the outbox table installed, written through `hookd-outbox` as an application would.
//!
//! MySQL/MariaDB databases are made on the server `HOOKD_TEST_MYSQL_URL` names (its user may
//! create databases: `mysql://root@127.0.0.1:3306/test`); each test makes its own database and
//! drops it. Without the variable those tests say they are skipped, unless
//! `HOOKD_TEST_REQUIRE_MYSQL=1` (CI), where they fail. PostgreSQL's are
//! `hookd_store::testing`'s.

use std::path::PathBuf;
use std::time::Duration;

use hookd_outbox::Event;
use hookd_store::testing::fresh_postgres;
use sqlx::mysql::MySqlConnection;
use sqlx::{AssertSqlSafe, Connection as _, MySqlPool, PgPool};

use crate::Kind;

/// Generates, for each async test function `$name(producer: Producer)`, a module `$name` with
/// one `#[tokio::test]` per kind of producer database: `postgres` and `mysql` (which say they
/// are skipped without their server) and `sqlite`.
#[macro_export]
macro_rules! on_every_kind {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let test = concat!(module_path!(), "::postgres");
                if let Some(producer) = $crate::testing::Producer::postgres(test).await {
                    super::$name(producer).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                let test = concat!(module_path!(), "::mysql");
                if let Some(producer) = $crate::testing::Producer::mysql(test).await {
                    super::$name(producer).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::testing::Producer::sqlite().await).await;
            }
        }
    )*};
}

pub const MYSQL_URL_VAR: &str = "HOOKD_TEST_MYSQL_URL";
pub const REQUIRE_MYSQL_VAR: &str = "HOOKD_TEST_REQUIRE_MYSQL";

/// A new, empty database on the test server: its URL and the guard that drops it. `None`
/// (after printing `SKIPPED test`) when no server is configured.
pub async fn fresh_mysql(test: &str) -> Option<(String, MySqlDatabaseGuard)> {
    let Some(server_url) = std::env::var(MYSQL_URL_VAR)
        .ok()
        .filter(|url| !url.is_empty())
    else {
        if std::env::var(REQUIRE_MYSQL_VAR).as_deref() == Ok("1") {
            panic!("{test}: {REQUIRE_MYSQL_VAR}=1 but {MYSQL_URL_VAR} is not set");
        }
        println!("SKIPPED {test}: {MYSQL_URL_VAR} not set");
        return None;
    };
    let name = format!("hookd_test_{}", hookd_store::testing::random_hex());
    let mut admin = MySqlConnection::connect(&server_url)
        .await
        .unwrap_or_else(|e| panic!("{test}: cannot connect to {MYSQL_URL_VAR}: {e}"));
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("{test}: cannot create database {name}: {e}"));
    let _ = admin.close().await;
    let url = hookd_store::testing::with_database(&server_url, &name);
    Some((url, MySqlDatabaseGuard { server_url, name }))
}

/// Drops the database [`fresh_mysql`] made when dropped (from a thread of its own, as
/// `hookd_store::testing::PgDatabaseGuard` does).
pub struct MySqlDatabaseGuard {
    server_url: String,
    name: String,
}

impl Drop for MySqlDatabaseGuard {
    fn drop(&mut self) {
        let (server_url, name) = (self.server_url.clone(), self.name.clone());
        let outcome = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let mut admin = MySqlConnection::connect(&server_url)
                    .await
                    .map_err(|e| e.to_string())?;
                sqlx::raw_sql(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`")))
                    .execute(&mut admin)
                    .await
                    .map_err(|e| e.to_string())?;
                let _ = admin.close().await;
                Ok::<_, String>(())
            })
        })
        .join();
        if !matches!(outcome, Ok(Ok(()))) {
            eprintln!("warning: cannot drop test database {}", self.name);
        }
    }
}

/// A producer's database with `hookd_outbox` installed.
pub struct Producer {
    pub url: String,
    pub db: Db,
    /// Drops the database (or the file's folder) with the producer.
    _guard: Box<dyn std::any::Any + Send + Sync>,
}

pub enum Db {
    Postgres(PgPool),
    MySql(MySqlPool),
    Sqlite(PathBuf),
}

impl Producer {
    /// A producer on PostgreSQL (a database of its own), or `None` when skipped.
    pub async fn postgres(test: &str) -> Option<Self> {
        let (url, guard) = fresh_postgres(test).await?;
        crate::install(&url, "producer", "hookd").await.unwrap();
        let pool = PgPool::connect(&url).await.unwrap();
        Some(Self {
            url,
            db: Db::Postgres(pool),
            _guard: Box::new(guard),
        })
    }

    /// A producer on MySQL/MariaDB, or `None` when skipped.
    pub async fn mysql(test: &str) -> Option<Self> {
        let (url, guard) = fresh_mysql(test).await?;
        crate::install(&url, "producer", "hookd").await.unwrap();
        let pool = MySqlPool::connect(&url).await.unwrap();
        Some(Self {
            url,
            db: Db::MySql(pool),
            _guard: Box::new(guard),
        })
    }

    /// A producer's SQLite file.
    pub async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.db");
        let url = format!("sqlite://{}", path.display());
        crate::install(&url, "producer", "hookd").await.unwrap();
        Self {
            url,
            db: Db::Sqlite(path),
            _guard: Box::new(dir),
        }
    }

    pub fn kind(&self) -> Kind {
        Kind::of(&self.url).unwrap()
    }

    /// Inserts `events` in one transaction, then commits it or rolls it back.
    pub async fn write(&self, events: &[Event], commit: bool) {
        match &self.db {
            Db::Postgres(pool) => {
                let mut tx = pool.begin().await.unwrap();
                for event in events {
                    event.clone().to_source().insert(&mut *tx).await.unwrap();
                }
                finish(tx, commit).await;
            }
            Db::MySql(pool) => {
                let mut tx = pool.begin().await.unwrap();
                for event in events {
                    event.insert_mysql(&mut *tx).await.unwrap();
                }
                finish(tx, commit).await;
            }
            Db::Sqlite(path) => {
                let mut conn = rusqlite::Connection::open(path).unwrap();
                conn.busy_timeout(Duration::from_secs(5)).unwrap();
                let tx = conn.transaction().unwrap();
                for event in events {
                    event.clone().to_source().insert_sqlite(&tx).unwrap();
                }
                if commit {
                    tx.commit().unwrap();
                } else {
                    tx.rollback().unwrap();
                }
            }
        }
    }

    /// Commits `events`, failing at once (not after a wait) if a lock held elsewhere is in
    /// the way: the transaction may wait at most a second for a row lock, never for SQLite's
    /// write lock.
    pub async fn commit_without_waiting(&self, events: &[Event]) {
        match &self.db {
            Db::Postgres(pool) => {
                let mut tx = pool.begin().await.unwrap();
                sqlx::query("SET LOCAL lock_timeout = '1s'")
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                for event in events {
                    event.clone().to_source().insert(&mut *tx).await.unwrap();
                }
                tx.commit().await.unwrap();
            }
            Db::MySql(pool) => {
                let mut conn = pool.acquire().await.unwrap();
                sqlx::query("SET SESSION innodb_lock_wait_timeout = 1")
                    .execute(&mut *conn)
                    .await
                    .unwrap();
                let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
                for event in events {
                    event.insert_mysql(&mut *tx).await.unwrap();
                }
                tx.commit().await.unwrap();
                sqlx::query("SET SESSION innodb_lock_wait_timeout = DEFAULT")
                    .execute(&mut *conn)
                    .await
                    .unwrap();
            }
            Db::Sqlite(path) => {
                let mut conn = rusqlite::Connection::open(path).unwrap();
                conn.busy_timeout(Duration::ZERO).unwrap();
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .unwrap();
                for event in events {
                    event.clone().to_source().insert_sqlite(&tx).unwrap();
                }
                tx.commit().unwrap();
            }
        }
    }

    pub async fn commit(&self, events: &[Event]) {
        self.write(events, true).await;
    }

    /// Runs SQL written for every kind (no placeholders).
    pub async fn execute(&self, sql: &str) {
        match &self.db {
            Db::Postgres(pool) => {
                sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
                    .execute(pool)
                    .await
                    .unwrap();
            }
            Db::MySql(pool) => {
                sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
                    .execute(pool)
                    .await
                    .unwrap();
            }
            Db::Sqlite(path) => {
                rusqlite::Connection::open(path)
                    .unwrap()
                    .execute_batch(sql)
                    .unwrap();
            }
        }
    }

    /// The rows still in the table: id and error, oldest first.
    pub async fn rows(&self) -> Vec<(i64, Option<String>)> {
        let sql = "SELECT id, error FROM hookd_outbox ORDER BY id";
        match &self.db {
            Db::Postgres(pool) => sqlx::query_as(sql).fetch_all(pool).await.unwrap(),
            Db::MySql(pool) => sqlx::query_as(sql).fetch_all(pool).await.unwrap(),
            Db::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).unwrap();
                let mut stmt = conn.prepare(sql).unwrap();
                stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap()
            }
        }
    }
}

async fn finish<DB: sqlx::Database>(tx: sqlx::Transaction<'_, DB>, commit: bool) {
    if commit {
        tx.commit().await.unwrap();
    } else {
        tx.rollback().await.unwrap();
    }
}
