//! The engine's SSRF guard, as a sink sees it: a broker is reached only at addresses the
//! guard allows, the same rules as an HTTP endpoint's (`--allow-subnet` opens private ones).

use std::net::SocketAddr;

use async_trait::async_trait;

use crate::SinkError;

/// Resolves a broker's host and keeps only the addresses the guard allows.
#[async_trait]
pub trait AddressGuard: Send + Sync {
    /// The addresses `host:port` may be connected at, or [`SinkError::Refused`] naming why
    /// none may (or [`SinkError::Connect`] when the name does not resolve).
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, SinkError>;
}
