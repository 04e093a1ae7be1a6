//! The customer's side: a small webhook receiver on 127.0.0.1 that hookd's endpoints point at.
//!
//! Publishing needs a subscribed endpoint so that every message writes its delivery row as in
//! production; the delivery benchmarks need something that answers fast (or, for the
//! slow-endpoint test, slowly) and counts what arrived. It runs on the harness's own runtime.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use tokio::task::JoinHandle;

/// How the receiver behaves.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Time taken before answering each request (zero: answer at once).
    pub delay: Duration,
}

/// A running receiver answering 204 to any POST; stopped when dropped.
pub struct Receiver {
    address: SocketAddr,
    received: Arc<AtomicU64>,
    server: JoinHandle<()>,
}

impl Receiver {
    /// Starts a receiver on a free loopback port.
    pub async fn start(options: Options) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("cannot bind the receiver")?;
        let address = listener.local_addr()?;
        let received = Arc::new(AtomicU64::new(0));
        let state = (received.clone(), options.delay);
        let app = Router::new()
            .fallback(axum::routing::post(receive))
            .with_state(state);
        let server = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                eprintln!("warning: the receiver stopped: {error}");
            }
        });
        Ok(Self {
            address,
            received,
            server,
        })
    }

    /// The URL an endpoint named `name` should point at.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/hooks/{name}", self.address)
    }

    /// How many webhooks have arrived so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn receive(
    State((received, delay)): State<(Arc<AtomicU64>, Duration)>,
    _body: axum::body::Bytes,
) -> StatusCode {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    received.fetch_add(1, Ordering::Relaxed);
    StatusCode::NO_CONTENT
}
