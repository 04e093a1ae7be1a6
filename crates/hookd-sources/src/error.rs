//! [`SourceError`]: what can go wrong configuring, installing or relaying an outbox source.

use hookd_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The source's configuration is wrong (its name, its URL's scheme, a bound application).
    #[error("{0}")]
    Config(String),
    /// The producer's database has no (or a newer) outbox table.
    #[error("{0}")]
    NotInstalled(String),
    /// The producer's database refused or could not be reached.
    #[error("the source database: {0}")]
    Database(String),
    /// hookd's own store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for SourceError {
    fn from(error: sqlx::Error) -> Self {
        Self::Database(error.to_string())
    }
}

impl From<rusqlite::Error> for SourceError {
    fn from(error: rusqlite::Error) -> Self {
        Self::Database(error.to_string())
    }
}
