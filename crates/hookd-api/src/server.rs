//! The accept loop: every connection served as HTTP/1.1, and none held open while silent.
//!
//! [`ConnectionLimit`] bounds the connections hookd holds, so a connection that is never
//! closed holds one of its slots for good. `axum::serve` gives hyper no timer, so hyper's
//! header-read timeout never runs: a peer that connects and sends nothing, or a client pool's
//! keep-alive connection left idle, was held as long as the peer kept it open, and as many of
//! them as the limit locked every other client out of the API (two silent connections did it
//! to a hookd started with `--max-connections 2`). Here every connection runs with hyper's
//! timer and a header-read timeout, which hyper counts from the moment it waits for a request
//! head: a connection that has not sent a whole head within it, its first or its next one, is
//! closed. Requests in progress are not affected.
//!
//! HTTP/1.1 only: the Svix SDKs, the portal and the CLI all speak it, and detecting HTTP/2
//! would read the first bytes with no timeout at all.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::serve::Listener;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

use crate::ConnectionLimit;

/// Serves `app` on the connections `listener` accepts until `shutdown` completes, then stops
/// accepting and waits for the open connections to finish their requests in progress (idle
/// ones close at once).
///
/// A connection that leaves `header_timeout` pass without a whole request head (the first, or
/// the next on a kept-alive connection) is closed.
pub async fn serve<L>(
    mut listener: ConnectionLimit<L>,
    app: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) where
    L: Listener,
    L::Io: Send + 'static,
{
    let connections = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let io = tokio::select! {
            (io, _) = listener.accept() => io,
            () = &mut shutdown => break,
        };
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(app.clone()));
        let connection = connections.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "an API connection ended with an error");
            }
        });
    }
    drop(listener);
    connections.shutdown().await;
}
