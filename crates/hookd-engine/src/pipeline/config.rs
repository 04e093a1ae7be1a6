//! [`EngineConfig`]: how the engine behaves (its worker budget, per-endpoint ceiling,
//! timeouts, lease, retry schedule, signing keys, shutdown grace) and the defaults it starts
//! from. Kept apart from the loop so that every setting reads as one list.

use std::sync::Arc;
use std::time::Duration;

use hookd_vault::Keyring;

use crate::pipeline::schedule::RetrySchedule;
use crate::telemetry;

/// How the engine behaves.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Attempts in flight across all endpoints. Twice as many deliveries may be held at once
    /// (claimed ahead, in flight, or waiting for their record).
    pub workers: usize,
    /// The most attempts in flight to any one endpoint (an endpoint's own `maxConcurrency` may
    /// set fewer); within it, each endpoint's limit adapts to its answers. On PostgreSQL it
    /// holds across every process.
    pub endpoint_max_concurrency: usize,
    /// Attempt timeout for endpoints that do not set their own (the spec asks 15..30 s).
    pub attempt_timeout: Duration,
    /// How long a claim lasts before another claimer may take the delivery again. Attempt
    /// timeouts are capped at a third of it: a claimed delivery may wait behind up to two
    /// rounds of its endpoint's attempts before its own, and must still end inside its lease.
    pub lease: Duration,
    /// How often to look for retries coming due when nothing wakes the engine.
    pub poll_interval: Duration,
    pub schedule: RetrySchedule,
    /// An endpoint failing without a single success for this long is disabled.
    pub disable_after: Duration,
    /// A delivery's attempts failing this many times in a row send the
    /// `message.attempt.failing` operational webhook (Svix: the fourth); 0 never does.
    pub failing_after: u32,
    /// Also send `svix-id`, `svix-timestamp` and `svix-signature`.
    pub svix_headers: bool,
    /// The master keys that open endpoints' sealed signing keys. The default is a new
    /// in-memory key (for tests); `hookd serve` gives the configured one.
    pub keyring: Arc<Keyring>,
    /// On shutdown, how long attempts in flight may go on to finish and be recorded before
    /// they are cut short and their claims given back.
    pub shutdown_grace: Duration,
    /// Adds a W3C `traceparent` header (the attempt's span) to every delivery, so receivers
    /// can join the trace.
    pub traceparent: Option<telemetry::Traceparent>,
}

impl EngineConfig {
    /// [`Self::workers`] unless set: attempts in flight in all.
    pub const DEFAULT_WORKERS: usize = 512;
    /// [`Self::endpoint_max_concurrency`] unless set (`hookd serve --help` says why so high).
    pub const DEFAULT_ENDPOINT_MAX_CONCURRENCY: usize = 512;
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            workers: Self::DEFAULT_WORKERS,
            endpoint_max_concurrency: Self::DEFAULT_ENDPOINT_MAX_CONCURRENCY,
            attempt_timeout: Duration::from_secs(15),
            lease: Duration::from_secs(90),
            poll_interval: Duration::from_secs(1),
            schedule: RetrySchedule::default(),
            disable_after: Duration::from_secs(5 * 24 * 3600),
            failing_after: 4,
            svix_headers: false,
            keyring: Arc::new(Keyring::ephemeral()),
            shutdown_grace: Duration::from_secs(10),
            traceparent: None,
        }
    }
}
