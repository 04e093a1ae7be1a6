//! The storage error of the inbox and the version store, one enum for both backends so code
//! written against the traits handles one type.

/// An inbox or version-store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused or failed.
    #[cfg(feature = "sqlite")]
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL refused or failed, or could not be reached.
    #[cfg(feature = "postgres")]
    #[error("postgres: {0}")]
    Postgres(#[from] sqlx::Error),
    /// A table name that is not a plain lowercase identifier.
    #[error("invalid table name {0:?}: use lowercase letters, digits and _ (at most 63 bytes)")]
    TableName(String),
    /// The blocking task running an SQLite statement panicked.
    #[error("the database task panicked")]
    Panicked,
}
