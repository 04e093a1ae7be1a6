//! [`SourceRelay`]: relays one outbox source into hookd, for as long as hookd runs.
//!
//! A pass takes the source's oldest waiting rows, publishes them through hookd's store (one
//! transaction, each row keyed by the table's identity and its id) and then removes them from
//! the producer's table. A crash between the two leaves rows that the next pass finds already
//! published and only removes: each committed row becomes one message. While the producer's
//! database is unreachable the relay backs off (doubling up to [`MAX_BACKOFF`]), logs each
//! failure and reports it in the per-source metrics; hookd's API and deliveries do not wait
//! for it.

use std::sync::Arc;
use std::time::Duration;

use hookd_core::{Clock, StrictlyLater};
use hookd_store::{RelayRules, Relayed, Store};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::source::redacted;
use crate::table::{Backlog, Table};
use crate::{SourceError, SourceSpec};

/// The longest wait between two tries while the producer's database fails: how late, at
/// most, relaying resumes once it is back.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// A failing source logs its first failure and every this many after (about once a minute
/// at the longest backoff); the metrics say the rest.
const LOG_EVERY: u32 = 12;
/// How often the backlog gauges are read from the producer's database.
const SAMPLE_INTERVAL: Duration = Duration::from_secs(2);

const WAITING: &str = "hookd_outbox_source_rows_waiting";
const FAILED: &str = "hookd_outbox_source_rows_failed";
const OLDEST: &str = "hookd_outbox_source_oldest_row_seconds";
const UP: &str = "hookd_outbox_source_up";
const RELAYED: &str = "hookd_outbox_source_relayed_total";
const ERRORS: &str = "hookd_outbox_source_errors_total";
const LAST_ERROR: &str = "hookd_outbox_source_last_error_timestamp_seconds";

/// Describes the per-source metrics (each labelled `source`).
pub fn describe_metrics() {
    metrics::describe_gauge!(WAITING, "Rows waiting in the outbox source's table.");
    metrics::describe_gauge!(
        FAILED,
        "Rows kept in the outbox source's table with an error."
    );
    metrics::describe_gauge!(
        OLDEST,
        metrics::Unit::Seconds,
        "How long the outbox source's oldest waiting row has waited (0 when none waits)."
    );
    metrics::describe_gauge!(
        UP,
        "1 while the relay reaches the outbox source's database, 0 while it fails."
    );
    metrics::describe_counter!(RELAYED, "Rows of the outbox source published as messages.");
    metrics::describe_counter!(
        ERRORS,
        "Failed relay passes of the outbox source (its database unreachable or refusing)."
    );
    metrics::describe_gauge!(
        LAST_ERROR,
        metrics::Unit::Seconds,
        "When the outbox source's relay last failed, in unix seconds (the log has the error)."
    );
}

/// How a source relay behaves.
#[derive(Clone, Debug)]
pub struct SourceRelayConfig {
    /// The rules each row must meet (the API's for a published message).
    pub rules: RelayRules,
    /// Most rows in one pass.
    pub batch: usize,
    /// How often to look when nothing wakes the relay: a source that notifies (PostgreSQL)
    /// is looked at this often anyway, in case a notification was lost.
    pub poll_interval: Duration,
    /// The same for a source that cannot notify.
    pub poll_interval_unsignalled: Duration,
}

/// The relay of one outbox source. Start it with [`SourceRelay::run`].
pub struct SourceRelay {
    spec: SourceSpec,
    table: Table,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: SourceRelayConfig,
    new_work: Arc<Notify>,
    wake: Arc<Notify>,
    /// Each pass's time, so that a pass's messages sort after the one before's.
    passes: StrictlyLater,
}

impl SourceRelay {
    /// A relay of `spec` into `store`; it notifies `new_work` when it has created deliveries.
    /// Nothing is connected yet.
    pub fn new(
        spec: SourceSpec,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        config: SourceRelayConfig,
        new_work: Arc<Notify>,
    ) -> Result<Self, SourceError> {
        Ok(Self {
            table: Table::new(&spec.url)?,
            spec,
            store,
            clock,
            config,
            new_work,
            wake: Arc::new(Notify::new()),
            passes: StrictlyLater::default(),
        })
    }

    /// Relays until `shutdown` completes.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let signalled = self.table.watch(self.wake.clone());
        let poll = if signalled {
            self.config.poll_interval
        } else {
            self.config.poll_interval_unsignalled
        };
        let source = self.spec.name.clone();
        tracing::info!(%source, url = %redacted(&self.spec.url), kind = %self.spec.kind, "relaying the outbox source");
        let (mut failures, mut next_sample) = (0u32, Instant::now());
        loop {
            let wait = match self.pass().await {
                Ok(full) => {
                    if failures > 0 {
                        tracing::info!(%source, "the outbox source is reachable again; relaying");
                    }
                    failures = 0;
                    metrics::gauge!(UP, "source" => source.clone()).set(1.0);
                    if Instant::now() >= next_sample {
                        self.sample().await;
                        next_sample = Instant::now() + SAMPLE_INTERVAL;
                    }
                    if full {
                        continue;
                    }
                    poll
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    metrics::gauge!(UP, "source" => source.clone()).set(0.0);
                    metrics::counter!(ERRORS, "source" => source.clone()).increment(1);
                    let at = self.clock.now().as_millis() as f64 / 1000.0;
                    metrics::gauge!(LAST_ERROR, "source" => source.clone()).set(at);
                    let wait = backoff(failures);
                    if failures % LOG_EVERY == 1 {
                        let error =
                            hookd_core::redact::error_text(&error.to_string(), &self.spec.url);
                        tracing::warn!(%source, %error, failures, retry_in = ?wait, "cannot relay the outbox source; its rows wait in its table");
                    }
                    wait
                }
            };
            tokio::select! {
                () = &mut shutdown => break,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One pass. Returns whether it was full, i.e. more rows may be waiting.
    pub async fn pass(&self) -> Result<bool, SourceError> {
        let batch = self.config.batch.max(1);
        let Some(mut taken) = self.table.take(batch, self.spec.app.as_deref()).await? else {
            return Ok(false);
        };
        let rows = std::mem::take(&mut taken.rows);
        let ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
        let now = self.passes.now(self.clock.as_ref());
        let fates = self
            .store
            .relay_source_rows(&taken.table_id, rows, &self.config.rules, now)
            .await?;
        self.table.settle(taken.hold, &ids, &fates).await?;
        let mut relayed = Relayed::default();
        for fate in &fates {
            relayed.count(fate);
        }
        let source = self.spec.name.clone();
        metrics::counter!(RELAYED, "source" => source.clone()).increment(relayed.messages as u64);
        if relayed.deliveries > 0 {
            self.new_work.notify_one();
        }
        if relayed.failed > 0 {
            tracing::warn!(%source, failed = relayed.failed, "outbox source rows could not be relayed; they keep their error in the source's table");
        }
        Ok(ids.len() == batch)
    }

    /// Reads the backlog into the gauges; a failure leaves them as they were (the next pass
    /// reports it).
    async fn sample(&self) {
        let Ok(Backlog {
            waiting,
            failed,
            oldest,
        }) = self.table.backlog().await
        else {
            return;
        };
        let source = self.spec.name.clone();
        metrics::gauge!(WAITING, "source" => source.clone()).set(waiting as f64);
        metrics::gauge!(FAILED, "source" => source.clone()).set(failed as f64);
        metrics::gauge!(OLDEST, "source" => source).set(oldest.as_secs_f64());
    }
}

/// The wait after the `failures`th failure in a row: doubling from [`FIRST_BACKOFF`] up to
/// [`MAX_BACKOFF`].
fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_a_tenth_of_a_second_up_to_its_ceiling() {
        let waits: Vec<u128> = (1..=8).map(|n| backoff(n).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
