//! A complete webhook receiver to copy: the "200-fast" pattern from the seed design guide.
//!
//! The handler verifies the signature over the raw body, records the webhook in the inbox (one
//! conditional insert: a retry is a duplicate), answers 204 at once, and wakes a worker. The
//! worker applies each event later, in one conditional upsert that keeps only the newest
//! version of each consignment, so a late retry of an old status never overwrites a newer one.
//! A crash after the answer loses nothing: the inbox row is the queue, and the worker picks up
//! whatever is still pending when it starts.
//!
//! ```sh
//! WEBHOOK_SECRETS="whsec_…" cargo run -p hookd-receiver --example receiver
//! ```
//!
//! - `WEBHOOK_SECRETS`: the endpoint's secrets, space-separated (two during a rotation);
//!   `whsec_…` verifies `v1`, `whpk_…` verifies `v1a`.
//! - `RECEIVER_LISTEN`: address to listen on [default 127.0.0.1:8000].
//! - `RECEIVER_DATABASE`: SQLite file [default receiver.db].
//!
//! Events come in the Standard Webhooks envelope (the application's `envelope: true`):
//! `{"type":"consignment.updated","timestamp":"…","data":{"consignment":"C-4471",
//! "status":"delivered","version":4}}`; a test send carries `"test":true` and changes nothing.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{FromRef, State};
use axum::http::StatusCode;
use axum::routing::post;
use hookd_receiver::{
    Applied, Inbox, InboxOptions, Pending, Seen, SqliteDb, SqliteInbox, SqliteVersions,
    VersionStore, Webhook, WebhookVerifier,
};
use tokio::sync::Notify;

/// What the handler needs: the verifier (the `Webhook` extractor finds it through `FromRef`),
/// the inbox, and the bell that wakes the worker.
#[derive(Clone)]
pub struct App {
    pub verifier: WebhookVerifier,
    pub inbox: SqliteInbox,
    pub wake: Arc<Notify>,
}

impl FromRef<App> for WebhookVerifier {
    fn from_ref(app: &App) -> Self {
        app.verifier.clone()
    }
}

/// `POST /webhooks`. Unverified requests never get here: the extractor answers them 401.
async fn receive(State(app): State<App>, webhook: Webhook) -> StatusCode {
    let Some(id) = webhook.id.as_deref() else {
        return StatusCode::BAD_REQUEST;
    };
    match app.inbox.record(id, &webhook.body).await {
        Ok(Seen::New) => {
            app.wake.notify_one();
            StatusCode::NO_CONTENT
        }
        // A retry or resend: acknowledge it so the sender stops, and change nothing.
        Ok(Seen::Duplicate) => StatusCode::NO_CONTENT,
        // Not stored: say so, and the sender will retry.
        Err(error) => {
            tracing::error!(%error, webhook_id = id, "cannot record webhook");
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

pub fn router(app: App) -> Router {
    Router::new()
        .route("/webhooks", post(receive))
        .with_state(app)
}

/// What every delivery is: the Standard Webhooks envelope, marked when it is a test send.
#[derive(serde::Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(default)]
    test: bool,
    data: serde_json::Value,
}

/// The event this receiver understands: `consignment.updated`'s data.
#[derive(serde::Deserialize)]
struct ConsignmentEvent {
    consignment: String,
    status: String,
    version: i64,
}

/// Applies one recorded webhook: only a newer version changes the consignment.
async fn process(consignments: &SqliteVersions, pending: &Pending) {
    let event = serde_json::from_slice::<Envelope>(&pending.payload).and_then(|envelope| {
        match (envelope.test, envelope.event_type.as_str()) {
            (false, "consignment.updated") => serde_json::from_value(envelope.data).map(Some),
            // A test send (the mark is inside the signed body) or another type: nothing to do.
            _ => Ok(None),
        }
    });
    let event: ConsignmentEvent = match event {
        Ok(Some(event)) => event,
        Ok(None) => {
            tracing::info!(
                webhook_id = pending.webhook_id,
                "a test or another type, ignored"
            );
            return;
        }
        Err(error) => {
            // Signed by the sender but not an event we know: keep a trace, do not retry forever.
            tracing::warn!(%error, webhook_id = pending.webhook_id, "ignoring unknown event");
            return;
        }
    };
    let state = serde_json::json!({"status": event.status}).to_string();
    match consignments
        .apply(&event.consignment, event.version, &state)
        .await
    {
        Ok(Applied::Newer) => tracing::info!(
            consignment = event.consignment,
            status = event.status,
            version = event.version,
            "applied"
        ),
        Ok(Applied::Stale) => tracing::info!(
            consignment = event.consignment,
            version = event.version,
            "stale, skipped"
        ),
        Err(error) => tracing::error!(%error, "cannot apply; retried after the lease"),
    }
}

/// The worker: processes pending webhooks oldest first, sleeps until woken (or a second, to
/// pick up rows whose lease ran out), and purges ids past the retention window hourly.
pub async fn work(inbox: SqliteInbox, consignments: SqliteVersions, wake: Arc<Notify>) {
    let mut purge = tokio::time::interval(Duration::from_secs(3600));
    loop {
        match inbox.claim(100).await {
            Ok(batch) if !batch.is_empty() => {
                for pending in &batch {
                    process(&consignments, pending).await;
                    if let Err(error) = inbox.mark_processed(&pending.webhook_id).await {
                        tracing::error!(%error, "cannot mark processed; it will run again");
                    }
                }
                continue;
            }
            Ok(_) => {}
            Err(error) => tracing::error!(%error, "cannot claim webhooks"),
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = purge.tick() => match inbox.purge().await {
                Ok(purged) => tracing::debug!(purged, "purged old webhook ids"),
                Err(error) => tracing::error!(%error, "cannot purge"),
            },
        }
    }
}

/// Opens the database, and returns the router to serve and the worker to spawn.
pub async fn start(
    secrets: &str,
    database: &str,
) -> Result<(Router, impl Future<Output = ()> + Send + use<>), Box<dyn std::error::Error>> {
    let verifier = WebhookVerifier::standard_from_strs(secrets.split_whitespace())?;
    let db = SqliteDb::open(database)?;
    let inbox = db.inbox("webhook_inbox", InboxOptions::default()).await?;
    let consignments = db.versions("consignments").await?;
    let wake = Arc::new(Notify::new());
    let worker = work(inbox.clone(), consignments, wake.clone());
    let app = App {
        verifier,
        inbox,
        wake,
    };
    Ok((router(app), worker))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let secrets = std::env::var("WEBHOOK_SECRETS").map_err(|_| "set WEBHOOK_SECRETS")?;
    let (router, worker) = start(&secrets, &env("RECEIVER_DATABASE", "receiver.db")).await?;
    tokio::spawn(worker);
    let listener = tokio::net::TcpListener::bind(env("RECEIVER_LISTEN", "127.0.0.1:8000")).await?;
    println!(
        "receiving webhooks at http://{}/webhooks",
        listener.local_addr()?
    );
    axum::serve(listener, router).await?;
    Ok(())
}
