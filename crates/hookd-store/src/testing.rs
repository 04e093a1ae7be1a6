//! Throwaway databases for tests, in this crate and in the crates above it: a SQLite file in a
//! temporary directory, or a PostgreSQL database made for one test and dropped after it.
//!
//! Behind the `testing` cargo feature; enable it from `[dev-dependencies]` only:
//!
//! ```toml
//! [dev-dependencies]
//! hookd-store = { workspace = true, features = ["testing"] }
//! ```
//!
//! PostgreSQL tests need a server: [`POSTGRES_URL_VAR`] names one (any database on it, e.g.
//! `postgres://postgres@127.0.0.1:5432/test`; the user must be allowed to create databases).
//! Without it a test is skipped with a `SKIPPED <test>: …` line on stdout, unless
//! [`REQUIRE_POSTGRES_VAR`] is `1` (as in CI), which makes a missing server a failure.
//!
//! ```ignore
//! #[tokio::test]
//! async fn publishes_on_postgres() {
//!     let Some((url, _db)) = hookd_store::testing::fresh_postgres("postgres::publishes").await
//!     else {
//!         return; // skipped
//!     };
//!     let store = hookd_store::open(&url).await.unwrap();
//!     // … `_db` drops the database when the test ends, even by panicking.
//! }
//! ```

use std::fmt::Write as _;

use sqlx::{AssertSqlSafe, Connection, PgConnection};
use tempfile::TempDir;

use crate::postgres::PgStore;
use crate::sqlite::SqliteStore;

/// The environment variable naming the PostgreSQL server tests may create databases on.
pub const POSTGRES_URL_VAR: &str = "HOOKD_TEST_POSTGRES_URL";

/// The environment variable that, set to `1`, fails PostgreSQL tests instead of skipping them
/// when [`POSTGRES_URL_VAR`] is unset.
pub const REQUIRE_POSTGRES_VAR: &str = "HOOKD_TEST_REQUIRE_POSTGRES";

/// Prefix of every database [`fresh_postgres`] creates: left-overs are easy to find.
pub const DATABASE_PREFIX: &str = "hookd_test_";

/// A `sqlite://` URL for a database file in a new temporary directory, deleted with the
/// returned directory.
pub fn fresh_sqlite() -> (String, TempDir) {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let path = dir.path().join("hookd.db");
    let path = path.to_str().expect("temporary paths are UTF-8 here");
    (format!("sqlite://{path}"), dir)
}

/// A [`SqliteStore`] on a new file; the file lives as long as the returned directory.
pub async fn sqlite_store() -> (SqliteStore, TempDir) {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let store = SqliteStore::open(dir.path().join("hookd.db"))
        .await
        .expect("open a SQLite store");
    (store, dir)
}

/// A new, empty PostgreSQL database on the server [`POSTGRES_URL_VAR`] names: its URL, and the
/// guard that drops it (see [`PgDatabaseGuard`]). `test` names the caller in the skip message.
///
/// `None` (after printing `SKIPPED <test>: …`) when the variable is unset; panics instead when
/// [`REQUIRE_POSTGRES_VAR`] is `1`, or when the server cannot be reached.
pub async fn fresh_postgres(test: &str) -> Option<(String, PgDatabaseGuard)> {
    fresh_postgres_with(test, "").await
}

/// [`fresh_postgres`], with `create_options` appended to `CREATE DATABASE "…"`, e.g.
/// `TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'` for a test that needs a
/// particular collation.
pub async fn fresh_postgres_with(
    test: &str,
    create_options: &str,
) -> Option<(String, PgDatabaseGuard)> {
    let Some(server_url) = std::env::var(POSTGRES_URL_VAR)
        .ok()
        .filter(|url| !url.is_empty())
    else {
        if std::env::var(REQUIRE_POSTGRES_VAR).as_deref() == Ok("1") {
            panic!(
                "{test}: {REQUIRE_POSTGRES_VAR}=1 but {POSTGRES_URL_VAR} is not set; set it to a \
                 PostgreSQL server URL such as postgres://postgres@127.0.0.1:5432/test"
            );
        }
        println!("SKIPPED {test}: {POSTGRES_URL_VAR} not set");
        return None;
    };
    let name = format!("{DATABASE_PREFIX}{}", random_hex());
    let mut admin = PgConnection::connect(&server_url)
        .await
        .unwrap_or_else(|e| panic!("{test}: cannot connect to {POSTGRES_URL_VAR}: {e}"));
    sqlx::query(AssertSqlSafe(format!(
        r#"CREATE DATABASE "{name}" {create_options}"#
    )))
    .execute(&mut admin)
    .await
    .unwrap_or_else(|e| panic!("{test}: cannot create database {name}: {e}"));
    let _ = admin.close().await;
    let url = with_database(&server_url, &name);
    Some((
        url,
        PgDatabaseGuard {
            server_url,
            name: Some(name),
        },
    ))
}

/// A [`PgStore`] on a new database (see [`fresh_postgres`]), migrated.
pub async fn postgres_store(test: &str) -> Option<(PgStore, PgDatabaseGuard)> {
    let (url, guard) = fresh_postgres(test).await?;
    let store = PgStore::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("{test}: cannot open a PgStore on {}: {e}", guard.name()));
    Some((store, guard))
}

/// Owns a database [`fresh_postgres`] created, and drops it (`DROP DATABASE … WITH (FORCE)`,
/// which also ends any connections still open to it) when dropped itself.
///
/// Dropping happens in `Drop`, so a test that panics cleans up too. `Drop` cannot await, and
/// may run on an async runtime that must not be blocked into a nested one, so it connects
/// from a short-lived thread with its own single-threaded runtime and waits for it. A failure
/// to drop is printed, never a panic (a panic while a failing test unwinds would abort the
/// whole test binary). A test process killed outright (SIGKILL) leaves its database behind;
/// every such database is named `hookd_test_…`.
#[derive(Debug)]
pub struct PgDatabaseGuard {
    server_url: String,
    /// `None` once dropped explicitly.
    name: Option<String>,
}

impl PgDatabaseGuard {
    /// The database's name.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    /// Drops the database now, from async code, reporting failure to the caller.
    pub async fn drop_database(mut self) -> Result<(), sqlx::Error> {
        match self.name.take() {
            Some(name) => drop_database(&self.server_url, &name).await,
            None => Ok(()),
        }
    }
}

impl Drop for PgDatabaseGuard {
    fn drop(&mut self) {
        let Some(name) = self.name.take() else {
            return;
        };
        let server_url = self.server_url.clone();
        let thread_name = name.clone();
        let outcome = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime
                .block_on(drop_database(&server_url, &thread_name))
                .map_err(|e| e.to_string())
        })
        .join();
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(error)) => eprintln!("warning: cannot drop test database {name}: {error}"),
            Err(_) => eprintln!("warning: dropping test database {name} panicked"),
        }
    }
}

async fn drop_database(server_url: &str, name: &str) -> Result<(), sqlx::Error> {
    let mut admin = PgConnection::connect(server_url).await?;
    sqlx::query(AssertSqlSafe(format!(
        r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#
    )))
    .execute(&mut admin)
    .await?;
    admin.close().await
}

/// 16 random hex digits: database names that parallel tests and processes cannot share.
pub fn random_hex() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    bytes.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

/// `url` with its database (the path) replaced by `database`, query string kept.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    let mut out = format!("{}/{database}", &base[..authority_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn the_database_is_replaced_and_the_rest_kept() {
        assert_eq!(
            with_database("postgres://u@h:5432/test", "x"),
            "postgres://u@h:5432/x"
        );
        assert_eq!(with_database("postgres://u@h", "x"), "postgres://u@h/x");
        assert_eq!(
            with_database("postgresql://u:p@h/test?sslmode=disable", "x"),
            "postgresql://u:p@h/x?sslmode=disable"
        );
        assert_eq!(
            with_database("postgres://h?user=u", "x"),
            "postgres://h/x?user=u"
        );
    }
}
