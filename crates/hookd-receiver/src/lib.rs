//! The receiving side of webhooks, for people who receive hookd's (or any Standard Webhooks,
//! Stripe or GitHub sender's) webhooks: verify each request over its raw body, deduplicate by
//! webhook id, apply state changes only when newer, and answer fast.
//!
//! ```no_run
//! # #[cfg(all(feature = "axum", feature = "sqlite"))]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{Router, routing::post, extract::State, http::StatusCode};
//! use hookd_receiver::{Inbox, InboxOptions, SqliteDb, SqliteInbox, Webhook, WebhookVerifier};
//!
//! #[derive(Clone)]
//! struct App { verifier: WebhookVerifier, inbox: SqliteInbox }
//! impl axum::extract::FromRef<App> for WebhookVerifier {
//!     fn from_ref(app: &App) -> Self { app.verifier.clone() }
//! }
//!
//! async fn receive(State(app): State<App>, webhook: Webhook) -> StatusCode {
//!     // Verified before this line runs; a retry is acknowledged and ignored.
//!     let Some(id) = webhook.id.as_deref() else { return StatusCode::BAD_REQUEST };
//!     match app.inbox.record(id, &webhook.body).await {
//!         Ok(_) => StatusCode::NO_CONTENT, // new or duplicate: a worker processes it later
//!         Err(_) => StatusCode::SERVICE_UNAVAILABLE, // not stored: let the sender retry
//!     }
//! }
//!
//! let verifier = WebhookVerifier::standard_from_strs(["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])?;
//! let inbox = SqliteDb::open("receiver.db")?.inbox("webhook_inbox", InboxOptions::default()).await?;
//! let router: Router = Router::new()
//!     .route("/webhooks", post(receive))
//!     .with_state(App { verifier, inbox });
//! # Ok(()) }
//! ```
//!
//! `examples/receiver.rs` is the complete "200-fast" receiver: verify, record (which enqueues),
//! answer, and a worker that applies events in version order afterwards.
//!
//! # Layout
//! - `verify`: [`WebhookVerifier`] (Standard Webhooks `v1`/`v1a`, Stripe, GitHub; several
//!   secrets at once) and the verified [`Webhook`]. Framework-free.
//! - `axum` (feature `axum`, default): the [`Webhook`] extractor, [`VerifyLayer`], and
//!   [`WebhookRejection`] (401 with a JSON reason).
//! - `inbox`: the [`Inbox`] trait, [`Seen`], [`Pending`], [`InboxOptions`] (30-day retention;
//!   raw payloads kept for reprocessing when asked).
//! - `ordering`: the [`VersionStore`] trait and [`Applied`]: newer versions only.
//! - `sql`: the statements both backends share, and table-name checking.
//! - `sqlite` (feature `sqlite`): [`SqliteDb`], [`SqliteInbox`], [`SqliteVersions`] (rusqlite).
//! - `postgres` (feature `postgres`): [`PgDb`], [`PgInbox`], [`PgVersions`] (sqlx).
//! - `error`: [`StoreError`].
//!
//! Depends on `webhook-signature` only among hookd's crates: a receiver needs no server.

#![warn(missing_docs)]

#[cfg(feature = "axum")]
mod axum;
mod error;
mod inbox;
mod ordering;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
mod verify;

#[cfg(feature = "axum")]
pub use crate::axum::{VerifyLayer, VerifyService, WebhookRejection};
pub use error::StoreError;
pub use inbox::{Clock, DEFAULT_LEASE, DEFAULT_RETENTION, Inbox, InboxOptions, Pending, Seen};
pub use ordering::{Applied, VersionStore};
#[cfg(feature = "postgres")]
pub use postgres::{PgDb, PgInbox, PgVersions};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteDb, SqliteInbox, SqliteVersions};
pub use verify::{GITHUB_DELIVERY, Scheme, Webhook, WebhookVerifier};
pub use webhook_signature::{VerifyError, VerifyingKey};
