//! Load shedding: bounds on the connections hookd holds open and on the requests in progress.
//!
//! Without them, a producer publishing faster than the database can commit makes requests wait
//! in memory without limit (and time out anyway). With them, memory stays bounded, requests
//! within the bounds keep their latency, and the rest learn to retry: a request past the
//! in-flight bound gets 503 at once (the official SDKs retry 503 by themselves), a connection
//! past the connection bound waits in the kernel's accept queue until one closes. Nothing is
//! stored for a shed request.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ApiError;

/// The requests hookd works on at once.
#[derive(Clone)]
pub struct InFlight(Arc<Semaphore>);

impl InFlight {
    pub fn new(limit: usize) -> Self {
        Self(Arc::new(Semaphore::new(limit.max(1))))
    }
}

/// Middleware: runs the request if under the bound, else answers 503.
pub async fn shed(
    State(in_flight): State<InFlight>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let _permit = in_flight
        .0
        .try_acquire()
        .map_err(|_| ApiError::Overloaded)?;
    Ok(next.run(request).await)
}

/// A listener that holds at most `limit` connections open; past it, it stops accepting until
/// one closes, so new connections wait in the kernel's accept queue (and past that queue are
/// refused by the kernel) instead of each taking a task and buffers in hookd.
///
/// The in-flight bound alone does not bound memory: a request is counted only once hookd has
/// read it, and a client opening connections faster than an overloaded hookd reads them (an
/// open-loop load generator does) would leave any number of connections waiting to be read,
/// about 50 KiB each.
pub struct ConnectionLimit<L> {
    listener: L,
    open: Arc<Semaphore>,
}

impl<L: Listener> ConnectionLimit<L> {
    pub fn new(listener: L, limit: usize) -> Self {
        Self {
            listener,
            open: Arc::new(Semaphore::new(limit.max(1))),
        }
    }
}

impl<L: Listener> Listener for ConnectionLimit<L> {
    type Io = Counted<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let slot = self
            .open
            .clone()
            .acquire_owned()
            .await
            .expect("the connection semaphore is never closed");
        let (io, address) = self.listener.accept().await;
        (Counted { io, _slot: slot }, address)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// A connection counted against [`ConnectionLimit`] until it is dropped.
pub struct Counted<Io> {
    io: Io,
    _slot: OwnedSemaphorePermit,
}

impl<Io: AsyncRead + Unpin> AsyncRead for Counted<Io> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for Counted<Io> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::Router;
    use axum::middleware::from_fn_with_state;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio::sync::Notify;

    use super::*;

    #[tokio::test]
    async fn past_the_bound_requests_get_503_at_once() {
        let release = Arc::new(Notify::new());
        let held = release.clone();
        let app = Router::new()
            .route("/slow", get(move || async move { held.notified().await }))
            .route("/fast", get(|| async {}))
            .layer(from_fn_with_state(InFlight::new(1), shed));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

        let slow = tokio::spawn(reqwest::get(format!("{base}/slow")));
        let shed = loop {
            let answer = reqwest::get(format!("{base}/fast")).await.unwrap();
            if answer.status() == 503 {
                break answer;
            }
            tokio::time::sleep(Duration::from_millis(5)).await; // the slow one is not in yet
        };
        let body: serde_json::Value = shed.json().await.unwrap();
        assert_eq!(body["code"], "overloaded");
        release.notify_one();
        assert_eq!(slow.await.unwrap().unwrap().status(), 200);
        let after = reqwest::get(format!("{base}/fast")).await.unwrap();
        assert_eq!(
            after.status(),
            200,
            "capacity comes back when the request ends"
        );
    }

    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nhost: hookd\r\n\r\n";

    /// Sends `REQUEST` on `stream` and reads until the answer's body ("ok") is in.
    async fn ask(stream: &mut TcpStream) -> String {
        stream.write_all(REQUEST).await.unwrap();
        answer(stream).await
    }

    async fn answer(stream: &mut TcpStream) -> String {
        let mut answer = Vec::new();
        while !answer.ends_with(b"\r\n\r\nok") {
            let mut chunk = [0u8; 512];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the connection closed before its answer");
            answer.extend_from_slice(&chunk[..n]);
        }
        String::from_utf8(answer).unwrap()
    }

    #[tokio::test]
    async fn past_the_connection_bound_a_connection_waits_until_one_closes() {
        let app = Router::new().route("/", get(|| async { "ok" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let limited = ConnectionLimit::new(listener, 1);
        tokio::spawn(crate::serve(limited, app, LONG, std::future::pending()));

        let mut first = TcpStream::connect(address).await.unwrap();
        assert!(ask(&mut first).await.starts_with("HTTP/1.1 200"));
        // The kernel completes the second connection, but hookd does not take it up while
        // the first (kept alive) is open: its request stays unanswered.
        let mut second = TcpStream::connect(address).await.unwrap();
        second.write_all(REQUEST).await.unwrap();
        let mut byte = [0u8; 1];
        let early = tokio::time::timeout(Duration::from_millis(300), second.read(&mut byte)).await;
        assert!(
            early.is_err(),
            "the second connection was served beside the first"
        );
        drop(first);
        assert!(answer(&mut second).await.starts_with("HTTP/1.1 200"));
    }

    /// A header timeout no test waits out.
    const LONG: Duration = Duration::from_secs(3600);

    /// Long enough for a request written at once to be read, short for a test to wait out.
    const SHORT: Duration = Duration::from_millis(200);

    /// Serves "ok" at `/` on a listener that holds one connection, closing connections that
    /// wait `SHORT` for a request head; answers its address.
    async fn one_connection_server() -> std::net::SocketAddr {
        let app = Router::new().route("/", get(|| async { "ok" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let limited = ConnectionLimit::new(listener, 1);
        tokio::spawn(crate::serve(limited, app, SHORT, std::future::pending()));
        address
    }

    /// Asks on a new connection; its answer, however long the wait for a slot (a test that
    /// hangs instead fails after a minute).
    async fn ask_in_turn(address: std::net::SocketAddr) -> String {
        let mut stream = TcpStream::connect(address).await.unwrap();
        let asked = tokio::time::timeout(Duration::from_secs(60), ask(&mut stream)).await;
        asked.expect("the connection was never served")
    }

    /// Whether the server closed `stream` (a read sees its end).
    async fn closed(stream: &mut TcpStream) -> bool {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut byte)).await;
        matches!(read, Ok(Ok(0)) | Ok(Err(_)))
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_is_closed_and_frees_its_slot() {
        let address = one_connection_server().await;
        let mut silent = TcpStream::connect(address).await.unwrap();

        assert!(ask_in_turn(address).await.starts_with("HTTP/1.1 200"));
        assert!(
            closed(&mut silent).await,
            "the silent connection is still open"
        );
    }

    #[tokio::test]
    async fn a_kept_alive_connection_left_idle_is_closed_and_frees_its_slot() {
        let address = one_connection_server().await;
        let mut idle = TcpStream::connect(address).await.unwrap();
        assert!(ask(&mut idle).await.starts_with("HTTP/1.1 200"));

        assert!(ask_in_turn(address).await.starts_with("HTTP/1.1 200"));
        assert!(closed(&mut idle).await, "the idle connection is still open");
    }
}
