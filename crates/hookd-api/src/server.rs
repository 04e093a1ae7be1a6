//! The accept loop: every connection served as HTTP/1.1, and none held open while silent.
//!
//! [`ConnectionLimit`] bounds the connections hookd holds. `axum::serve` gives hyper no timer,
//! so hyper's header-read timeout would never run, and a peer that connects and sends nothing
//! would hold a slot for as long as it liked. Here every connection runs with hyper's timer
//! and a header-read timeout, which hyper counts from the moment it waits for a request head:
//! a connection that has not sent a whole head within it, its first or its next one, is
//! closed. A new connection has a shorter deadline for its first head
//! ([`Timeouts::first_request`]): a client that connects means to send at once, while the
//! header timeout is sized for kept-alive connections waiting for their next request, and a
//! peer reconnecting as fast as it is closed would otherwise hold its slots that long each
//! time. Requests in progress are not affected. A connection the limit asks to make room
//! shuts down gracefully: at once if idle, after its answer otherwise; one that has not sent
//! a whole request head yet is closed at once (nothing was started on it). Either way, and at
//! the first-request deadline, what the client has sent by then is read first: a loaded
//! hookd may not have read a request that arrived in time, which is then answered.
//!
//! HTTP/1.1 only: the Svix SDKs, the portal and the CLI all speak it, and detecting HTTP/2
//! would read the first bytes with no timeout at all.

use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::task::Poll;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::HeaderValue;
use axum::http::header::CONNECTION;
use axum::response::Response;
use axum::serve::Listener;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tower::{Service, ServiceExt};

use crate::ConnectionLimit;
use crate::connections::Closing;

/// A request as hyper hands it over.
type Incoming = hyper::Request<hyper::body::Incoming>;

/// How long a connection may take to send a whole request head.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// For its first one, counted from when it was accepted.
    pub first_request: Duration,
    /// For every one, counted from when hyper starts waiting for it (the first one too, if
    /// this is the shorter).
    pub header: Duration,
}

/// Serves `app` on the connections `listener` accepts until `shutdown` completes, then stops
/// accepting and waits for the open connections to finish their requests in progress (idle
/// ones close at once).
///
/// A connection that misses one of its `timeouts` is closed; so is one the limit asks to make
/// room.
pub async fn serve<L>(
    mut listener: ConnectionLimit<L>,
    app: Router,
    timeouts: Timeouts,
    shutdown: impl Future<Output = ()>,
) where
    L: Listener<Addr = std::net::SocketAddr>,
    L::Io: Send + 'static,
{
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, peer) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let closing = io.closing();
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(timeouts.header)
            .serve_connection(
                TokioIo::new(io),
                service(app.clone(), closing.clone(), peer),
            );
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let asked = tokio::select! {
                ended = connection.as_mut() => Some(ended),
                () = closing.now() => None,
                () = first_request_missed(&closing, timeouts.first_request) => None,
            };
            let ended = match asked {
                Some(ended) => ended,
                // What the client sent by now is read first, so a request it sent is answered:
                // a server slower than its clients must not take their requests for silence.
                None => match poll_fn(|cx| Poll::Ready(connection.as_mut().poll(cx))).await {
                    Poll::Ready(ended) => ended,
                    Poll::Pending if !closing.requested() => return, // nothing was started
                    Poll::Pending => {
                        connection.as_mut().graceful_shutdown();
                        connection.await
                    }
                },
            };
            if let Err(error) = ended {
                tracing::debug!(%error, "an API connection ended with an error");
            }
        });
    }
    listener.close_all().await;
}

/// Completes once `deadline` has passed without a whole request head on the connection; never
/// if one came in.
async fn first_request_missed(closing: &Closing, deadline: Duration) {
    tokio::time::sleep(deadline).await;
    if closing.requested() {
        std::future::pending::<()>().await;
    }
}

/// `app` for one connection from `peer`: each request is noted as it comes in (see
/// [`Closing::note_request`]) and carries the peer's address (axum's `ConnectInfo`), and an answer sent once the limit asked the connection to close
/// after its answer says `connection: close`, so hyper closes the connection once it is sent
/// and the client knows not to send another request on it.
fn service(
    app: Router,
    closing: Closing,
    peer: std::net::SocketAddr,
) -> TowerToHyperService<
    impl Service<Incoming, Response = Response, Error = Infallible, Future: Send> + Clone,
> {
    TowerToHyperService::new(tower::service_fn(move |mut request: Incoming| {
        closing.note_request();
        request.extensions_mut().insert(ConnectInfo(peer));
        let closing = closing.clone();
        let answer = app.clone().oneshot(request);
        async move {
            let mut response = answer.await?;
            if closing.after_answer() {
                let close = HeaderValue::from_static("close");
                response.headers_mut().insert(CONNECTION, close);
            }
            Ok(response)
        }
    }))
}
