//! The storage layer's one error type; the API maps it to HTTP once, at its edge.

/// What went wrong in a storage call.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique key is taken (a uid, an `eventId`, an event-type name). The text names it.
    #[error("{0}")]
    Conflict(String),
    /// The record to change does not exist.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The database cannot be reached or cannot write (disk full, connection lost).
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The database URL or options are unusable.
    #[error("{0}")]
    Config(String),
    /// Stored data that does not decode: a bug or a hand-edited database.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        Self::Unavailable(error.to_string())
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        Self::Unavailable(error.to_string())
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(error: serde_json::Error) -> Self {
        Self::Corrupt(error.to_string())
    }
}
