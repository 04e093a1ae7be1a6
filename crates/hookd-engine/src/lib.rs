//! hookd's delivery engine: turns stored deliveries into signed HTTP POSTs, retried on a
//! schedule that spans days, fair across endpoints, and safe against hostile URLs.
//!
//! The engine shares nothing with the API but the store and a wake-up handle: the API writes
//! messages and their deliveries and notifies; the engine claims due deliveries (with a lease,
//! so a crash loses nothing), sends, records every attempt, and schedules the next.
//!
//! # Layout
//! - [`dispatcher`]: [`Engine`], the claim → send → record loop, its graceful shutdown, and
//!   its [`EngineConfig`].
//! - [`relay`]: [`Relay`], which turns committed outbox rows into messages and deliveries.
//! - [`retention`]: [`Purger`], which purges the content of settled messages past their
//!   retention, in small batches.
//! - `lanes`: each endpoint's claimed deliveries waiting for its slots (its adaptive
//!   concurrency, rate limit and pauses), so one endpoint never holds up another.
//! - `adaptive`: the per-endpoint concurrency limit learned from the answers.
//! - `attempt`: the signed request for a delivery (signed with every key of the endpoint live
//!   at that instant, opened from their sealed form), and what its outcome means.
//! - `recorder`: writes finished attempts to the store, many per transaction.
//! - [`notices`]: [`Notices`], e-mail to customers when hookd disables their endpoint or gives
//!   up on a message, following the operational events.
//! - `operations`: the operational webhooks of attempts and disabled endpoints, written with
//!   the change they tell of.
//! - [`tasks`]: [`TaskRunner`], which runs background tasks (replays, expunging an
//!   application's contents) a chunk at a time.
//! - [`schedule`]: [`RetrySchedule`] and `Retry-After`.
//! - [`http`]: [`http::WebhookSender`], the one shared HTTP client: timeouts, no redirects,
//!   capped response reads.
//! - [`ssrf`]: [`ssrf::AddressPolicy`], which addresses deliveries may reach.
//! - [`telemetry`]: the engine's metrics (attempts by outcome class, their latency,
//!   deliveries settled), through the `metrics` facade.
//! - `testing` (cargo feature `testing`): a recording HTTP receiver for tests.

mod adaptive;
mod attempt;
pub mod dispatcher;
pub mod http;
mod lanes;
pub mod notices;
mod operations;
mod recorder;
pub mod relay;
pub mod retention;
pub mod schedule;
pub mod ssrf;
pub mod tasks;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;

pub use dispatcher::{Engine, EngineConfig};
pub use notices::{Mailer, NoticeConfig, Notices};
pub use relay::{Relay, RelayConfig};
pub use retention::{Purger, RetentionConfig};
pub use schedule::RetrySchedule;
pub use tasks::TaskRunner;
