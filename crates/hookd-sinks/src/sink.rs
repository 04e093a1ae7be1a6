//! The contract between the engine and a destination type.

use async_trait::async_trait;

use crate::Publication;

/// A destination's broker or store, connected (or connecting on first use).
#[async_trait]
pub trait Sink: Send + Sync {
    /// Publishes `batch` (one publication, except for destinations that batch) and answers
    /// once the broker has acknowledged every one of them: only then is the delivery done.
    async fn publish(&self, batch: &[Publication]) -> Result<Published, SinkError>;
}

/// A broker's acknowledgement, shown as the attempt's response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// What the broker answered, short and readable (a queue's message id, a stream's
    /// sequence number, an object's key), as the delivery log shows it.
    pub summary: String,
}

/// Why a publication did not reach its destination: the attempt fails and is retried on the
/// schedule, like an HTTP endpoint's failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    /// The broker could not be reached (refused, reset, DNS, TLS).
    #[error("connect: {0}")]
    Connect(String),
    /// The broker's address is one the SSRF guard refuses.
    #[error("address refused: {0}")]
    Refused(String),
    /// No answer in time.
    #[error("timed out")]
    Timeout,
    /// The broker answered with an error (code and text as it gave them).
    #[error("{code}: {text}")]
    Rejected { code: String, text: String },
    /// The destination's configuration cannot work (say, a queue URL that is not a URL).
    #[error("configuration: {0}")]
    Config(String),
}
