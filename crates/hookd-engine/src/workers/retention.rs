//! The purger: drops the content (payloads and attempts) of settled messages whose retention
//! has run out, then, later, their records (message and delivery rows), in the background of
//! every engine process.
//!
//! What is purged, and why a message with a delivery still to do never is, is the store's
//! contract ([`hookd_store::RetentionStore`]). This loop only paces it: small batches (each one
//! short transaction) with a pause between them, so purging a large backlog never holds the
//! database long enough to stall deliveries, and a pass every [`RetentionConfig::interval`]
//! otherwise. Time comes from the [`Clock`], so tests move it instead of waiting.

use std::sync::Arc;
use std::time::Duration;

use hookd_core::Clock;
use hookd_store::{PurgeCursor, PurgeRequest, Purged, Store};

use crate::telemetry;

/// How the purger behaves.
#[derive(Clone, Debug)]
pub struct RetentionConfig {
    /// Content of settled messages without their own retention period is kept this long after
    /// the message was created.
    pub window: Duration,
    /// Records (message and delivery rows) of purged messages are deleted this long after the
    /// message was created; `None` keeps them for ever.
    pub records: Option<Duration>,
    /// A deleted record's `eventId` stays taken this long after its message was created.
    pub event_ids: Duration,
    /// Most messages looked at in one batch (one transaction).
    pub batch: usize,
    /// The pause between two batches of one pass.
    pub pause: Duration,
    /// The wait between the end of one pass and the start of the next.
    pub interval: Duration,
}

/// The purger. Start it with [`Purger::run`].
pub struct Purger {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: RetentionConfig,
}

impl Purger {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: RetentionConfig) -> Self {
        Self {
            store,
            clock,
            config,
        }
    }

    /// Purges, pass after pass, until `shutdown` completes.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut cursor = PurgeCursor::default();
        let mut total = Purged::default();
        loop {
            let wait = match self.batch(&cursor).await {
                Ok(batch) => {
                    telemetry::purged(&batch);
                    total.messages += batch.messages;
                    total.attempts += batch.attempts;
                    total.records += batch.records;
                    total.deliveries += batch.deliveries;
                    total.event_ids += batch.event_ids;
                    match batch.next {
                        Some(next) => {
                            cursor = next;
                            self.config.pause
                        }
                        None => {
                            self.pass_over(std::mem::take(&mut total));
                            telemetry::purge_pass_over(self.clock.now());
                            cursor = PurgeCursor::default();
                            self.config.interval
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot purge expired content; trying again later");
                    self.config.interval
                }
            };
            tokio::select! {
                () = &mut shutdown => break,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One batch at the clock's current time.
    pub async fn batch(&self, cursor: &PurgeCursor) -> Result<Purged, hookd_store::StoreError> {
        let now = self.clock.now();
        let request = PurgeRequest {
            now,
            window_start: now.minus(self.config.window),
            records_before: self.config.records.map(|keep| now.minus(keep)),
            event_ids_before: now.minus(self.config.event_ids),
            limit: self.config.batch.max(1),
            cursor: cursor.clone(),
        };
        self.store.purge_batch(&request).await
    }

    fn pass_over(&self, total: Purged) {
        if total.messages > 0 {
            tracing::info!(
                messages = total.messages,
                attempts = total.attempts,
                "purged the content of settled messages past their retention"
            );
        }
        if total.records > 0 || total.event_ids > 0 {
            tracing::info!(
                messages = total.records,
                deliveries = total.deliveries,
                event_ids_released = total.event_ids,
                "deleted the records of purged messages past --keep-records"
            );
        }
    }
}
