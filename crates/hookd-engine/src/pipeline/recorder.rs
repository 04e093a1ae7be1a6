//! Writing finished attempts to the store, many per transaction.
//!
//! Every attempt ends in a write: its row for the delivery log and its delivery's next state.
//! One transaction per attempt would make the database, not the receivers, the limit on
//! deliveries per second. So attempt tasks hand their verdicts to one recorder task, which
//! writes whatever has finished since its last write in one batch. The endpoint's slot, the
//! worker and the delivery's ticket (its place among the deliveries the engine holds with their
//! messages) are free as soon as the answer is in: a record waiting for a group commit does not
//! keep new deliveries from being taken meanwhile. What the attempt keeps until its record is
//! written is the place among the attempts not yet recorded that it took as it was sent, so a
//! slow database slows sending, and then claiming, instead of piling up unrecorded attempts,
//! and a crash before the write only lets the lease run out (the attempt is made again: at
//! least once).
//!
//! The operational webhooks an attempt causes (see [`crate::pipeline::operations`]) go into the same
//! write as its record, and `endpoint.disabled` into the write that disables the endpoint.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookd_core::Timestamp;
use hookd_core::model::DeliveryStatus;
use hookd_store::{AttemptRecord, Recorded, Store};
use tokio::sync::{Notify, OwnedSemaphorePermit, mpsc};

use crate::pipeline::attempt::Verdict;
use crate::pipeline::operations::Operations;
use crate::pipeline::schedule::describe_duration;
use crate::telemetry;

/// Most attempts written in one transaction. One write is in flight at a time, so this is
/// what one round trip to the database can record: as many as the attempts that may wait for
/// their record at the default `--workers`, so that records keep up with a fan-out whose writes
/// each wait for a group commit, and the places they hold go back in bulk.
const MAX_BATCH: usize = 1024;

/// A finished attempt waiting for its write, with the place it holds until then.
pub struct Finished {
    pub verdict: Verdict,
    /// Held, not read: dropping it gives its place among the attempts not yet recorded
    /// back.
    pub _place: OwnedSemaphorePermit,
}

/// The recorder's side: what it needs to write and to react to what it wrote.
pub struct Recorder {
    pub store: Arc<dyn Store>,
    /// Woken after a batch that queued work (a retry, an operational webhook, the next
    /// delivery of an ordering key): the engine claims it.
    pub wake: Arc<Notify>,
    /// Woken after any other batch: the tickets freed since may claim again, if work waits.
    pub freed: Arc<Notify>,
    /// An endpoint failing without a single success for this long is disabled.
    pub disable_after: Duration,
    /// Builds the operational webhooks of what is recorded.
    pub operations: Operations,
}

impl Recorder {
    /// Writes finished attempts as they come until every sender is gone.
    pub async fn run(self, mut finished: mpsc::UnboundedReceiver<Finished>) {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while finished.recv_many(&mut batch, MAX_BATCH).await > 0 {
            let queued = self.write(&batch).await;
            batch.clear(); // gives the places back
            if queued {
                self.wake.notify_one();
            } else {
                self.freed.notify_one();
            }
        }
    }

    /// Writes a batch; returns whether that queued deliveries to claim.
    async fn write(&self, batch: &[Finished]) -> bool {
        let verdicts = batch.iter().map(|f| &f.verdict);
        let events = match self.operations.attempt_events(verdicts).await {
            Ok(events) => events,
            // Unwritten, the attempts are made again (and their events told then).
            Err(error) => {
                not_recorded(
                    batch,
                    &error,
                    "cannot name the operational webhooks of an attempt",
                );
                return false;
            }
        };
        let records: Vec<AttemptRecord> = batch
            .iter()
            .zip(events)
            .map(|(f, events)| AttemptRecord {
                attempt: f.verdict.attempt.clone(),
                next: f.verdict.next.clone(),
                lease: f.verdict.lease,
                hold_until: f
                    .verdict
                    .slow_down
                    .map(|pause| f.verdict.attempt.created_at.plus(pause)),
                events,
            })
            .collect();
        // A retry, an operational webhook, or the next delivery of a settled one's key.
        let mut queued = records.iter().any(|r| {
            r.next.status == DeliveryStatus::Pending
                || !r.events.is_empty()
                || (r.next.ordering_key.is_some() && r.next.next_attempt_at.is_none())
        });
        let started = Instant::now();
        match self.store.record_attempts(&records).await {
            Ok(recorded) => {
                telemetry::store_write("record", records.len(), started.elapsed());
                for (finished, recorded) in batch.iter().zip(recorded) {
                    queued |= self.after(&finished.verdict, recorded).await;
                }
                queued
            }
            // The leases run out and the deliveries are attempted again: at least once.
            Err(error) => {
                not_recorded(batch, &error, "cannot record an attempt");
                false
            }
        }
    }

    /// Logs what a recorded attempt means and disables its endpoint if it must be. Every line
    /// names the attempt, its message and its endpoint, as the dispatcher's "attempt made"
    /// does, so one id finds all of an attempt's lines. Returns whether it disabled the
    /// endpoint (which queues its operational webhook).
    async fn after(&self, verdict: &Verdict, recorded: Recorded) -> bool {
        let endpoint = &verdict.attempt.endpoint_id;
        let message = &verdict.attempt.message_id;
        let attempt = &verdict.attempt.id;
        let failing_since = match recorded {
            Recorded::Written { failing_since } => failing_since,
            Recorded::Gone => {
                tracing::debug!(message_id = %message, endpoint_id = %endpoint, attempt_id = %attempt, "delivery deleted during its attempt");
                return false;
            }
            Recorded::Stale => {
                tracing::warn!(message_id = %message, endpoint_id = %endpoint, attempt_id = %attempt, "attempt recorded after its lease ran out; the delivery was claimed again meanwhile, so only the attempt is logged");
                return false;
            }
        };
        tracing::debug!(message_id = %message, endpoint_id = %endpoint, attempt_id = %attempt, status = verdict.attempt.response_status_code, "attempt recorded");
        if verdict.next.status == DeliveryStatus::Fail && verdict.disable.is_none() {
            tracing::warn!(message_id = %message, endpoint_id = %endpoint, attempt_id = %attempt, attempts = verdict.next.attempt_count, "delivery failed for good after its last attempt");
        }
        let dead_for_days = failing_since
            .is_some_and(|since| verdict.attempt.created_at >= since.plus(self.disable_after));
        let reason = verdict.disable.clone().or_else(|| {
            dead_for_days.then(|| {
                format!(
                    "no successful delivery for {}",
                    describe_duration(self.disable_after)
                )
            })
        });
        let Some(reason) = reason else { return false };
        let disabled = async {
            let events = self
                .operations
                .disabled_events(verdict, failing_since, &reason)
                .await?;
            self.store
                .disable_endpoint(endpoint, &reason, verdict.attempt.created_at, &events)
                .await
        };
        // Not disabled now, it is on its next failure.
        match disabled.await {
            Ok(true) => {
                tracing::warn!(message_id = %message, endpoint_id = %endpoint, attempt_id = %attempt, %reason, failing_since = failing_since.map(Timestamp::to_rfc3339), "endpoint disabled");
                true
            }
            Ok(false) => false,
            Err(error) => {
                tracing::warn!(%error, message_id = %message, endpoint_id = %endpoint, attempt_id = %attempt, %reason, "cannot disable an endpoint");
                false
            }
        }
    }
}

/// Logs each attempt of a batch that could not be written, with its ids: one line per attempt,
/// so that looking an attempt up finds why it was made again once its lease ran out.
fn not_recorded(batch: &[Finished], error: &dyn std::fmt::Display, why: &str) {
    for finished in batch {
        let attempt = &finished.verdict.attempt;
        tracing::warn!(
            %error,
            message_id = %attempt.message_id,
            endpoint_id = %attempt.endpoint_id,
            attempt_id = %attempt.id,
            batch = batch.len(),
            "{why}; not recorded, it is made again when its lease runs out"
        );
    }
}
