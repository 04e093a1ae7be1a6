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

/// Fails with [`StoreError::NotFound`] when an update or delete touched no row.
pub(crate) fn touched(rows: u64, what: &'static str) -> Result<(), StoreError> {
    if rows == 0 {
        Err(StoreError::NotFound(what))
    } else {
        Ok(())
    }
}

/// The texts of [`StoreError::Conflict`]: one wording for a taken key, whichever database
/// noticed.
pub(crate) mod taken {
    pub fn app_uid(uid: Option<&str>) -> String {
        format!(
            "an application with uid {:?} already exists",
            uid.unwrap_or_default()
        )
    }

    pub fn endpoint_uid(uid: Option<&str>) -> String {
        format!(
            "an endpoint with uid {:?} already exists in this application",
            uid.unwrap_or_default()
        )
    }

    pub fn event_type(name: &str) -> String {
        format!("an event type named {name:?} already exists")
    }

    pub fn event_id(event_id: Option<&str>) -> String {
        format!(
            "a message with eventId {:?} already exists in this application",
            event_id.unwrap_or_default()
        )
    }

    pub fn token() -> String {
        "this token already exists".into()
    }
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
