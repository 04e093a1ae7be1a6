//! hookd's delivery engine: turns stored deliveries into signed HTTP POSTs, retried on a
//! schedule that spans days, fair across endpoints, and safe against hostile URLs.
//!
//! The engine shares nothing with the API but the store and a wake-up handle: the API writes
//! messages and their deliveries and notifies; the engine claims due deliveries (with a lease,
//! so a crash loses nothing), sends, records every attempt, and schedules the next.
//!
//! # Layout
//! - [`pipeline`]: the delivery pipeline, claim → send → record.
//!   - [`pipeline::dispatcher`]: [`Engine`] and its loop: claiming due deliveries into their
//!     endpoints' lanes, woken by new work, freed room and the poll interval.
//!   - [`pipeline::config`]: [`EngineConfig`], how the engine behaves, and its defaults.
//!   - `pipeline::send`: one attempt's task: it waits for its start, sends, frees its slot the
//!     moment the answer is in, and hands the verdict to the recorder.
//!   - `pipeline::leases`: starting held deliveries from their lanes as workers free up, and
//!     giving back the claims of those not attempted (a lease nearly out; the graceful
//!     shutdown).
//!   - `pipeline::handoff`: new deliveries taken as they are written, already claimed, through
//!     the store's `Handoff`.
//!   - `pipeline::lanes`: each endpoint's claimed deliveries waiting for its slots (its
//!     adaptive concurrency, rate limit and pauses), so one endpoint never holds up another.
//!   - `pipeline::adaptive`: the per-endpoint concurrency limit learned from the answers.
//!   - `pipeline::attempt`: the signed request for a delivery (signed with every key of the
//!     endpoint live at that instant, opened from their sealed form), and what its outcome
//!     means.
//!   - `pipeline::destinations`: attempts to destinations beyond HTTP, published through their
//!     sinks (`hookd-sinks`), kept per endpoint between attempts.
//!   - `pipeline::recorder`: writes finished attempts to the store, many per transaction.
//!   - `pipeline::operations`: the operational webhooks of attempts and disabled endpoints,
//!     written with the change they tell of.
//!   - [`pipeline::schedule`]: [`RetrySchedule`], its [`Jitter`], and `Retry-After`.
//! - [`http`]: [`http::WebhookSender`], the one shared HTTP client: timeouts, no redirects,
//!   capped response reads.
//!   - [`http::ssrf`]: [`http::ssrf::AddressPolicy`], which addresses deliveries may reach.
//!   - `http::resolve`: the DNS resolver that applies the SSRF guard to host names.
//!   - `http::guard`: the same guard for brokers' hosts, as `hookd_sinks::AddressGuard`.
//!   - `http::capture`: what the attempt log keeps of a response, a capped head and body.
//!   - `http::connect`: the direct client, hyper's pooled HTTP/1.1 client over the guarded
//!     resolver, with the connect timeout over TCP and TLS.
//!   - `http::tls`: the rustls configuration (platform roots, loaded once) all clients share.
//!   - `http::lifetime`: the clients endpoint origins are spread over, each replaced after
//!     the connection lifetime.
//! - [`workers`]: the background workers beside the pipeline.
//!   - [`workers::relay`]: [`Relay`], which turns committed outbox rows into messages and
//!     deliveries.
//!   - [`workers::retention`]: [`Purger`], which purges the content of settled messages past
//!     their retention, in small batches.
//!   - [`workers::tasks`]: [`TaskRunner`], which runs background tasks (replays, expunging an
//!     application's contents) a chunk at a time.
//!   - [`workers::notices`]: [`Notices`], e-mail to customers when hookd disables their
//!     endpoint or gives up on a message, following the operational events.
//! - [`telemetry`]: the engine's metrics (attempts by outcome class, their latency,
//!   deliveries settled), through the `metrics` facade.
//! - `testing` (cargo feature `testing`): a recording HTTP receiver for tests.

pub mod http;
pub mod pipeline;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod workers;

pub use pipeline::config::EngineConfig;
pub use pipeline::dispatcher::Engine;
pub use pipeline::schedule::{Jitter, RetrySchedule};
pub use workers::notices::{Mailer, NoticeConfig, Notices};
pub use workers::relay::{Relay, RelayConfig};
pub use workers::retention::{Purger, RetentionConfig};
pub use workers::tasks::TaskRunner;
