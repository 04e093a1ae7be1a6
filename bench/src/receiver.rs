//! The customer's side: a small webhook receiver on 127.0.0.1 that hookd's endpoints point at.
//!
//! Publishing needs a subscribed endpoint so that every message writes its delivery row as in
//! production; it runs that receiver on the harness's own runtime ([`Receiver`]). The delivery
//! and ceiling benchmarks run it in a process of its own ([`ReceiverProcess`], the hidden
//! `hookd-bench receive` subcommand), so that hookd, the load generator and the receiver each
//! have their own process as they would in production. Given endpoint secrets, it verifies
//! every `webhook-signature` and stamps the first verified receipt of each `webhook-id` with
//! the wall clock (unix nanoseconds, comparable with the publisher's send times on the same
//! machine); `GET /count` tells how many ids arrived and `GET /results` hands the tallies over
//! (clearing them).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::SocketAddr;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use webhook_signature::{Verifier, VerifyingKey};

use crate::api::unix_nanos;

/// How the receiver behaves.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Time taken before answering each request (zero: answer at once); the request is
    /// recorded when it arrives.
    pub delay: Duration,
    /// Endpoint secrets (`whsec_…`); when any, every request is verified and its receipt
    /// recorded.
    pub secrets: Vec<String>,
    /// Record receipts per endpoint: keyed `NAME/ID` (`NAME` from the `/hooks/NAME` path), so
    /// a fanned-out message counts once per endpoint instead of as duplicates.
    pub per_endpoint: bool,
}

/// What a verifying receiver saw.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Receipts {
    /// First verified receipt of each `webhook-id`, in unix nanoseconds.
    pub first_seen: HashMap<String, u64>,
    /// Verified requests for an id already seen (retries or duplicates).
    pub duplicates: u64,
    /// Requests whose signature did not verify (or had no webhook headers).
    pub bad_signatures: u64,
}

/// A verifier of signatures made with any of `secrets` (`whsec_…`).
pub fn verifier(secrets: &[String]) -> anyhow::Result<Verifier> {
    let keys = secrets
        .iter()
        .map(|s| VerifyingKey::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .context("an endpoint secret does not parse")?;
    Ok(Verifier::with_keys(keys))
}

/// The state every request handler shares.
struct Shared {
    delay: Duration,
    per_endpoint: bool,
    verifier: Option<Verifier>,
    received: AtomicU64,
    receipts: Mutex<Receipts>,
}

impl Shared {
    fn new(options: Options) -> anyhow::Result<Self> {
        let verifier = if options.secrets.is_empty() {
            None
        } else {
            Some(verifier(&options.secrets)?)
        };
        Ok(Self {
            delay: options.delay,
            per_endpoint: options.per_endpoint,
            verifier,
            received: AtomicU64::new(0),
            receipts: Mutex::new(Receipts::default()),
        })
    }

    /// Verifies (when it has keys) and records one request.
    fn record(&self, path: &str, headers: &HeaderMap, body: &[u8]) {
        let at = unix_nanos();
        self.received.fetch_add(1, Ordering::Relaxed);
        let Some(verifier) = &self.verifier else {
            return;
        };
        let pairs = headers
            .iter()
            .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)));
        let verified = verifier.verify(body, pairs).is_ok();
        let id = headers.get("webhook-id").and_then(|v| v.to_str().ok());
        let key = id.map(|id| match path.rsplit_once('/') {
            Some((_, name)) if self.per_endpoint => format!("{name}/{id}"),
            _ => id.to_owned(),
        });
        let key = key.filter(|_| verified);
        self.receipts.lock().expect("the receipts").record(key, at);
    }
}

impl Receipts {
    /// Records one arrival at `at`: under `key` when it verified, else as a bad signature.
    pub fn record(&mut self, key: Option<String>, at: u64) {
        match key {
            Some(key) => match self.first_seen.entry(key) {
                Entry::Occupied(_) => self.duplicates += 1,
                Entry::Vacant(first) => {
                    first.insert(at);
                }
            },
            None => self.bad_signatures += 1,
        }
    }
}

/// The receiver's routes: `GET /count`, `GET /results`, and 204 to a POST anywhere else.
fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/count", get(count))
        .route("/results", get(results))
        .fallback(axum::routing::post(receive))
        .with_state(shared)
}

async fn bind(port: u16) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .context("cannot bind the receiver")
}

/// A running receiver answering 204 to any POST, on the harness's runtime; stopped when
/// dropped.
pub struct Receiver {
    address: SocketAddr,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl Receiver {
    /// Starts a receiver on a free loopback port.
    pub async fn start(options: Options) -> anyhow::Result<Self> {
        let listener = bind(0).await?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared::new(options)?);
        let app = router(shared.clone());
        let server = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                eprintln!("warning: the receiver stopped: {error}");
            }
        });
        Ok(Self {
            address,
            shared,
            server,
        })
    }

    /// The URL an endpoint named `name` should point at.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/hooks/{name}", self.address)
    }

    /// How many webhooks have arrived so far.
    pub fn received(&self) -> u64 {
        self.shared.received.load(Ordering::Relaxed)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// What the `receive` subcommand prints before its address.
const ANNOUNCE: &str = "receiver listening on ";

/// The `receive` subcommand: serves on `port` (0: any free one), prints where, and runs until
/// its standard input closes (the parent ended) or it is killed.
pub async fn serve_process(port: u16, options: Options) -> anyhow::Result<()> {
    let listener = bind(port).await?;
    let app = router(Arc::new(Shared::new(options)?));
    println!("{ANNOUNCE}http://{}", listener.local_addr()?);
    let parent_gone = tokio::task::spawn_blocking(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = parent_gone.await;
        })
        .await
        .context("the receiver stopped")
}

/// A receiver in a child process (`hookd-bench receive`); killed when dropped.
pub struct ReceiverProcess {
    base_url: String,
    client: reqwest::Client,
    child: Child,
}

impl ReceiverProcess {
    /// Starts `hookd-bench receive` on a free port, verifying with `secrets` if any.
    pub fn start(secrets: &[String]) -> anyhow::Result<Self> {
        Self::start_with(secrets, false)
    }

    /// [`ReceiverProcess::start`], recording receipts per endpoint when `per_endpoint` (see
    /// [`Options::per_endpoint`]).
    pub fn start_with(secrets: &[String], per_endpoint: bool) -> anyhow::Result<Self> {
        let me = std::env::current_exe().context("cannot tell where hookd-bench runs from")?;
        let mut command = Command::new(me);
        command.args(["receive", "--port", "0"]);
        if per_endpoint {
            command.arg("--per-endpoint");
        }
        for secret in secrets {
            command.args(["--secret", secret]);
        }
        let (child, base_url) = crate::hookd::start_child(&mut command, ANNOUNCE)?;
        Ok(Self {
            base_url,
            client: reqwest::Client::new(),
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The URL an endpoint named `name` should point at.
    pub fn url(&self, name: &str) -> String {
        format!("{}/hooks/{name}", self.base_url)
    }

    /// Distinct ids received with a valid signature so far.
    pub async fn count(&self) -> anyhow::Result<u64> {
        let text = self.fetch("/count").await?.text().await?;
        text.trim()
            .parse()
            .with_context(|| format!("GET /count answered {text}"))
    }

    /// Everything it saw.
    pub async fn results(&self) -> anyhow::Result<Receipts> {
        Ok(self.fetch("/results").await?.json().await?)
    }

    async fn fetch(&self, path: &str) -> anyhow::Result<reqwest::Response> {
        let response = self
            .client
            .get(format!("{}{path}", self.base_url))
            .send()
            .await
            .with_context(|| format!("GET {path} of the receiver"))?;
        Ok(response.error_for_status()?)
    }
}

impl Drop for ReceiverProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn receive(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    // Recorded on arrival: a slow receiver's requests count while it is still answering.
    shared.record(uri.path(), &headers, &body);
    if !shared.delay.is_zero() {
        tokio::time::sleep(shared.delay).await;
    }
    StatusCode::NO_CONTENT
}

async fn count(State(shared): State<Arc<Shared>>) -> String {
    let receipts = shared.receipts.lock().expect("the receipts");
    receipts.first_seen.len().to_string()
}

async fn results(State(shared): State<Arc<Shared>>) -> Json<Receipts> {
    Json(std::mem::take(
        &mut *shared.receipts.lock().expect("the receipts"),
    ))
}
