//! Fresh stores for the behavioural suite: a SQLite file in a temporary directory, and a
//! PostgreSQL database made for one test and dropped after it.

use hookd_store::Store;
use hookd_store::sqlite::SqliteStore;

/// Generates, for each case, one `#[tokio::test]` per backend.
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
    };
}

/// A store on a new SQLite file; the directory lives as long as the returned guard.
pub async fn sqlite() -> (impl Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = SqliteStore::open(dir.path().join("hookd.db"))
        .await
        .expect("open SQLite store");
    (store, dir)
}
