//! Recording a batch of finished attempts on PostgreSQL in one statement.
//!
//! The engine records every attempt, so recording is on the path of every delivery. Written
//! row by row, a batch of `n` attempts costs `3n` round trips inside its transaction, and the
//! network, not the database, caps deliveries per second. Here a batch is one call of
//! `record_batch` (migration 0011), its own transaction: it locks the batch's endpoints, then
//! its deliveries, each in key order, as deleting an endpoint does (two processes recording
//! overlapping batches, or one recording while another deletes, cannot deadlock); then, in
//! the order the attempts were made, moves each delivery still under its attempt's lease and
//! inserts each attempt whose delivery still exists; then writes each endpoint's failure
//! streak and slow-down where they change. Only a batch that carries operational-webhook
//! messages (rare) opens a transaction around the call, to write them with it.
//!
//! The batches run on a connection kept while they follow one another (see `super::held`).
//! No `BEGIN` and `COMMIT` round trips, and nothing planned per batch: the function keeps
//! generic plans that read every row by key (`super::functions::plans` checks that none scans a table),
//! and the call is kept prepared. With several processes each records its own, smaller
//! batches, so a batch's fixed costs are what more processes multiply.

use hookd_core::Timestamp;
use hookd_core::model::DeliveryStatus;
use sqlx::{PgConnection, Postgres, Row as _};

use super::publish::insert_events;
use super::{PgStore, missing};
use crate::{AttemptRecord, Recorded, StoreError};

/// The call; its arguments are described in migration 0011.
pub(super) const RECORD_BATCH: &str = "SELECT was_logged, was_moved, streak_since
     FROM record_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                       $17, $18, $19, $20, $21, $22, $23)";

/// The smallest batch written by one statement for all its attempts, rather than by a
/// statement per attempt (which a batch that holds a delivery twice always is). Both keep their
/// generic plans; timed in the database, the one statement cost 0.49, 0.71 and 1.34 ms for
/// batches of 4, 8 and 24 attempts against 0.57, 0.96 and about 1.9 ms a statement each.
const SET_BASED_FROM: i32 = 2;

impl PgStore {
    /// Records `records` in one transaction; see [`crate::DeliveryQueue::record_attempts`].
    pub(super) async fn record_batch(
        &self,
        records: &[AttemptRecord],
    ) -> Result<Vec<Recorded>, StoreError> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let order = made_order(records);
        let made: Vec<&AttemptRecord> = order.iter().map(|&i| &records[i]).collect();
        let outcomes = if records.iter().all(|r| r.events.is_empty()) {
            let mut conn = self.recording.take().await?;
            let outcomes = call(&mut conn, &made, SET_BASED_FROM).await?;
            conn.keep();
            outcomes
        } else {
            let mut tx = self.pool.begin().await?;
            let outcomes = call(&mut tx, &made, SET_BASED_FROM).await?;
            for (record, outcome) in made.iter().zip(&outcomes) {
                if matches!(outcome, Recorded::Written { .. }) {
                    insert_events(&mut tx, &record.events).await?;
                }
            }
            tx.commit().await?;
            outcomes
        };
        let mut recorded = vec![Recorded::Gone; records.len()];
        for (i, outcome) in order.into_iter().zip(outcomes) {
            recorded[i] = outcome;
        }
        Ok(recorded)
    }
}

/// The batch's indexes in the order its attempts were made (the batch's order for ties).
fn made_order(records: &[AttemptRecord]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by_key(|&i| records[i].attempt.created_at);
    order
}

/// Calls `record_batch` with `made`, the attempts in the order they were made, written by one
/// statement for all if there are `set_from` or more; answers what became of each, in that
/// order.
pub(super) async fn call(
    conn: &mut PgConnection,
    made: &[&AttemptRecord],
    set_from: i32,
) -> Result<Vec<Recorded>, StoreError> {
    // Borrowed, not copied: a response body may be kilobytes, and every attempt is recorded.
    let text = |f: for<'r> fn(&'r AttemptRecord) -> &'r str| {
        made.iter().map(|r| f(r)).collect::<Vec<&str>>()
    };
    let number = |f: fn(&AttemptRecord) -> i64| made.iter().map(|r| f(r)).collect::<Vec<_>>();
    let time = |f: fn(&AttemptRecord) -> Option<Timestamp>| -> Vec<Option<i64>> {
        made.iter()
            .map(|r| f(r).map(Timestamp::as_millis))
            .collect()
    };
    let mut endpoints: Vec<&str> = made.iter().map(|r| r.next.endpoint_id.as_str()).collect();
    endpoints.sort_unstable();
    endpoints.dedup();
    let mut deliveries: Vec<(&str, &str)> = made
        .iter()
        .map(|r| (r.next.endpoint_id.as_str(), r.next.message_id.as_str()))
        .collect();
    deliveries.sort_unstable();
    deliveries.dedup();
    let (delivery_endpoints, delivery_messages): (Vec<&str>, Vec<&str>) =
        deliveries.into_iter().unzip();
    let rows = sqlx::query::<Postgres>(RECORD_BATCH)
        .bind(text(|r| r.next.message_id.as_str()))
        .bind(text(|r| r.next.endpoint_id.as_str()))
        .bind(number(|r| i64::from(r.next.status.code())))
        .bind(number(|r| i64::from(r.next.attempt_count)))
        .bind(time(|r| r.next.next_attempt_at))
        .bind(number(|r| r.next.updated_at.as_millis()))
        .bind(text(|r| r.attempt.id.as_str()))
        .bind(text(|r| &r.attempt.url))
        .bind(number(|r| i64::from(r.attempt.response_status_code)))
        .bind(text(|r| &r.attempt.response))
        .bind(text(|r| &r.attempt.response_head))
        .bind(number(|r| r.attempt.response_duration_ms))
        .bind(number(|r| i64::from(r.attempt.status.code())))
        .bind(number(|r| i64::from(r.attempt.trigger_type.code())))
        .bind(number(|r| r.attempt.created_at.as_millis()))
        .bind(time(|r| r.lease))
        .bind(time(|r| r.hold_until))
        .bind(&endpoints)
        .bind(&delivery_endpoints)
        .bind(&delivery_messages)
        .bind(i64::from(DeliveryStatus::Sending.code()))
        .bind(i64::from(DeliveryStatus::Success.code()))
        .bind(set_from)
        .fetch_all(conn)
        .await
        .map_err(missing("delivery"))?;
    rows.iter()
        .map(|row| {
            let (logged, moved): (bool, bool) = (row.try_get(0)?, row.try_get(1)?);
            let since: Option<i64> = row.try_get(2)?;
            Ok(match (logged, moved) {
                (false, _) => Recorded::Gone,
                (true, false) => Recorded::Stale,
                (true, true) => Recorded::Written {
                    failing_since: since.map(Timestamp::from_millis),
                },
            })
        })
        .collect()
}
