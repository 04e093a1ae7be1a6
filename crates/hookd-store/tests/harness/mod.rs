//! Fresh stores for the behavioural suite: a SQLite file in a temporary directory, and a
//! PostgreSQL database made for one test and dropped after it (see `hookd_store::testing`).
//! Each test binary uses part of this module.
#![allow(dead_code)]

pub mod checks;
pub mod fixtures;
pub mod outbox;
pub mod queue;

use hookd_store::postgres::PgStore;
use hookd_store::sqlite::SqliteStore;
use hookd_store::testing::{self, PgDatabaseGuard};

/// Generates, for each case, one `#[tokio::test]` per backend: `sqlite::<case>` and
/// `postgres::<case>`. The PostgreSQL one is skipped (it prints `SKIPPED …` and passes) when
/// `HOOKD_TEST_POSTGRES_URL` is unset, unless `HOOKD_TEST_REQUIRE_POSTGRES=1`.
#[macro_export]
macro_rules! behaviour {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    let (store, _dir) = $crate::harness::sqlite().await;
                    super::$case(&store).await;
                }
            )*
        }

        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    let test = concat!("postgres::", stringify!($case));
                    let Some((store, _db)) = $crate::harness::postgres(test).await else {
                        return;
                    };
                    // `_db` drops the database when this returns or panics.
                    super::$case(&store).await;
                }
            )*
        }
    };
}

/// A store on a new SQLite file; the directory lives as long as the returned guard.
pub async fn sqlite() -> (SqliteStore, tempfile::TempDir) {
    testing::sqlite_store().await
}

/// A store on a new PostgreSQL database, dropped with the returned guard; `None` when
/// `HOOKD_TEST_POSTGRES_URL` is unset (and PostgreSQL is not required). Its claims cap each
/// endpoint per claim, as SQLite's do, so both keep one contract (the cluster-wide caps are
/// PostgreSQL's own: `postgres_*.rs`).
pub async fn postgres(test: &str) -> Option<(PgStore, PgDatabaseGuard)> {
    let (store, guard) = testing::postgres_store(test).await?;
    Some((store.with_cluster_limits(false), guard))
}
