//! The accept loop: every connection served as HTTP/1.1, and none held open while silent.
//!
//! [`ConnectionLimit`] bounds the connections hookd holds. `axum::serve` gives hyper no timer,
//! so hyper's header-read timeout would never run, and a peer that connects and sends nothing
//! would hold a slot for as long as it liked. Here every connection runs with hyper's timer
//! and a header-read timeout, which hyper counts from the moment it waits for a request head:
//! a connection that has not sent a whole head within it, its first or its next one, is
//! closed. Requests in progress are not affected. A connection the limit asks to make room
//! shuts down gracefully: at once if idle, after its answer otherwise.
//!
//! HTTP/1.1 only: the Svix SDKs, the portal and the CLI all speak it, and detecting HTTP/2
//! would read the first bytes with no timeout at all.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::http::HeaderValue;
use axum::http::header::CONNECTION;
use axum::response::Response;
use axum::serve::Listener;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tower::ServiceExt;
use tower::util::MapResponse;

use crate::ConnectionLimit;
use crate::connections::Closing;

/// Serves `app` on the connections `listener` accepts until `shutdown` completes, then stops
/// accepting and waits for the open connections to finish their requests in progress (idle
/// ones close at once).
///
/// A connection that leaves `header_timeout` pass without a whole request head (the first, or
/// the next on a kept-alive connection) is closed; so is one the limit asks to make room.
pub async fn serve<L>(
    mut listener: ConnectionLimit<L>,
    app: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) where
    L: Listener,
    L::Io: Send + 'static,
{
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let io = tokio::select! {
            (io, _) = listener.accept() => io,
            () = &mut shutdown => break,
        };
        let closing = io.closing();
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(io), service(app.clone(), closing.clone()));
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                () = closing.now() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = ended {
                tracing::debug!(%error, "an API connection ended with an error");
            }
        });
    }
    listener.close_all().await;
}

/// `app` for one connection: an answer sent once the limit asked the connection to close after
/// its answer says `connection: close`, so hyper closes the connection once it is sent and the
/// client knows not to send another request on it.
fn service(
    app: Router,
    closing: Closing,
) -> TowerToHyperService<MapResponse<Router, impl Fn(Response) -> Response + Clone>> {
    let last = move |mut response: Response| {
        if closing.after_answer() {
            let close = HeaderValue::from_static("close");
            response.headers_mut().insert(CONNECTION, close);
        }
        response
    };
    let app = ServiceExt::<hyper::Request<hyper::body::Incoming>>::map_response(app, last);
    TowerToHyperService::new(app)
}
