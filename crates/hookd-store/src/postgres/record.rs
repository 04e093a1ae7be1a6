//! Recording a batch of finished attempts on PostgreSQL in a fixed number of round trips.
//!
//! The engine records every attempt, so recording is on the path of every delivery. Written
//! row by row, a batch of `n` attempts costs `3n` round trips inside its transaction, and the
//! network, not the database, caps deliveries per second. Here a batch costs five whatever its
//! size: lock the endpoints, lock the deliveries, one statement that moves the deliveries still
//! under their attempts' leases and inserts the attempts from arrays (`unnest`), one that
//! writes the endpoints' failure streaks (skipped when no streak changes), and the commit;
//! plus, rarely, the operational-webhook messages some records carry.
//!
//! The two locking statements are kept prepared: one round trip each, and no planning. A
//! statement that is not costs a second round trip (sqlx parses and describes it first) and a
//! plan per batch. But a kept statement runs a generic plan once five executions have used
//! it, chosen for the tables as they were then: a plain join of arrays to `deliveries`,
//! planned while the table was small, is a hash join over a sequential scan, which would scan
//! the whole table on every batch ever after. So the locks go through `LATERAL` subqueries,
//! one key lookup per array element whatever the table's size (`super::plans` checks their
//! generic plans), and the write, an `UPDATE` joined to arrays with no such form, is planned
//! for each batch.
//!
//! Locks are taken endpoints first, then deliveries, each in key order, as deleting an endpoint
//! does: two processes recording overlapping batches, or one recording while another deletes,
//! cannot deadlock.

use std::collections::{BTreeMap, HashMap, HashSet};

use hookd_core::Timestamp;
use hookd_core::model::DeliveryStatus;
use sqlx::PgConnection;

use super::messages::insert_events;
use super::{PgStore, missing};
use crate::{AttemptRecord, Recorded, StoreError};

/// Row-locks a batch's deliveries in the order of its arrays (sorted by the caller): the
/// function scan is the outer side of the nested loop a `LATERAL` subquery makes, and each row
/// is locked as the loop reaches it.
pub(super) const LOCK_DELIVERIES: &str =
    "SELECT 1 FROM unnest($1::text[], $2::text[]) k(endpoint_id, message_id)
     CROSS JOIN LATERAL (SELECT 1 FROM deliveries d
         WHERE d.endpoint_id = k.endpoint_id AND d.message_id = k.message_id
         FOR NO KEY UPDATE) locked";

/// Key-share locks the endpoints in `$1` in its order (sorted by the caller), each by its key.
pub(super) const LOCK_ENDPOINTS: &str = "SELECT e.id, e.failing_since FROM unnest($1::text[]) k(id)
     CROSS JOIN LATERAL (SELECT id, failing_since FROM endpoints WHERE id = k.id
         FOR KEY SHARE) e";

impl PgStore {
    /// Records `records` in one transaction; see [`crate::DeliveryQueue::record_attempts`].
    pub(super) async fn record_batch(
        &self,
        records: &[AttemptRecord],
    ) -> Result<Vec<Recorded>, StoreError> {
        let mut recorded = vec![Recorded::Gone; records.len()];
        if records.is_empty() {
            return Ok(recorded);
        }
        let mut tx = self.pool.begin().await?;
        let streaks = lock_endpoints(&mut tx, records).await?;
        // A delivery appears twice in a batch only if its lease ran out and it was claimed
        // again meanwhile; each round holds a delivery at most once, in the order the attempts
        // were made.
        for round in rounds(records, &made_order(records)) {
            let batch: Vec<&AttemptRecord> = round.iter().map(|&i| &records[i]).collect();
            let logged = write_round(&mut tx, &batch).await?;
            for i in round {
                recorded[i] = match logged.get(&key(&records[i])) {
                    None => Recorded::Gone,
                    Some(true) => Recorded::Written {
                        failing_since: None,
                    },
                    Some(false) => Recorded::Stale,
                };
            }
        }
        let failing_since = write_streaks(&mut tx, records, &recorded, &streaks).await?;
        hold_endpoints(&mut tx, records, &recorded).await?;
        for (record, recorded) in records.iter().zip(&recorded) {
            if matches!(recorded, Recorded::Written { .. }) {
                insert_events(&mut tx, &record.events).await?;
            }
        }
        tx.commit().await?;
        for (slot, since) in recorded.iter_mut().zip(failing_since) {
            if let Recorded::Written { failing_since } = slot {
                *failing_since = since;
            }
        }
        Ok(recorded)
    }
}

/// A delivery's key: (message id, endpoint id).
type Key = (String, String);

fn key(record: &AttemptRecord) -> Key {
    let d = &record.next;
    (d.message_id.to_string(), d.endpoint_id.to_string())
}

/// The batch's indexes in the order its attempts were made (the batch's order for ties).
fn made_order(records: &[AttemptRecord]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by_key(|&i| records[i].attempt.created_at);
    order
}

/// Splits `order` into rounds in which no delivery appears twice, each keeping that order.
fn rounds(records: &[AttemptRecord], order: &[usize]) -> Vec<Vec<usize>> {
    let mut rounds: Vec<(HashSet<Key>, Vec<usize>)> = Vec::new();
    for &i in order {
        let key = key(&records[i]);
        match rounds.iter_mut().find(|(keys, _)| !keys.contains(&key)) {
            Some((keys, members)) => {
                keys.insert(key);
                members.push(i);
            }
            None => rounds.push((HashSet::from([key]), vec![i])),
        }
    }
    rounds.into_iter().map(|(_, members)| members).collect()
}

/// Key-share locks the batch's endpoints (records of one endpoint share it; a delete waits)
/// and answers each live endpoint's current failure streak.
async fn lock_endpoints(
    tx: &mut PgConnection,
    records: &[AttemptRecord],
) -> Result<HashMap<String, Option<i64>>, StoreError> {
    let mut ids: Vec<&str> = records
        .iter()
        .map(|r| r.next.endpoint_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let rows: Vec<(String, Option<i64>)> = sqlx::query_as(LOCK_ENDPOINTS)
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?;
    Ok(rows.into_iter().collect())
}

/// Inserts each attempt whose delivery still exists, and moves to its next state each such
/// delivery still under the attempt's lease. Answers, per key logged, whether it moved.
async fn write_round(
    tx: &mut PgConnection,
    batch: &[&AttemptRecord],
) -> Result<HashMap<Key, bool>, StoreError> {
    let column = |f: fn(&AttemptRecord) -> String| batch.iter().map(|r| f(r)).collect::<Vec<_>>();
    let number = |f: fn(&AttemptRecord) -> i64| batch.iter().map(|r| f(r)).collect::<Vec<_>>();
    let message_ids = column(|r| r.next.message_id.to_string());
    let endpoint_ids = column(|r| r.next.endpoint_id.to_string());
    let mut locking: Vec<(&str, &str)> = endpoint_ids
        .iter()
        .zip(&message_ids)
        .map(|(e, m)| (e.as_str(), m.as_str()))
        .collect();
    locking.sort_unstable();
    let (lock_endpoints, lock_messages): (Vec<&str>, Vec<&str>) = locking.into_iter().unzip();
    sqlx::query(LOCK_DELIVERIES)
        .bind(&lock_endpoints)
        .bind(&lock_messages)
        .execute(&mut *tx)
        .await?;
    let next_attempt_at: Vec<Option<i64>> = batch
        .iter()
        .map(|r| r.next.next_attempt_at.map(Timestamp::as_millis))
        .collect();
    // Planned for each batch (not kept prepared): an `UPDATE` joined to arrays has no form
    // whose every generic plan reads its rows by key (`message_id = ANY(…)` beside the join
    // still froze as a sequential scan when first planned on a table of a few dozen pages).
    let logged: Vec<(String, String, bool)> = sqlx::query_as(
        "WITH input AS (
             SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[],
                                  $5::bigint[], $6::bigint[], $7::text[], $8::text[],
                                  $9::bigint[], $10::text[], $11::text[], $12::bigint[],
                                  $13::bigint[], $14::bigint[], $15::bigint[], $16::bigint[])
             AS i(message_id, endpoint_id, status, attempt_count, next_attempt_at, updated_at,
                  attempt_id, url, response_status_code, response, response_head,
                  response_duration_ms, attempt_status, trigger_type, created_at, lease)
         ), moved AS (
             UPDATE deliveries d SET status = i.status, attempt_count = i.attempt_count,
                 next_attempt_at = i.next_attempt_at, updated_at = i.updated_at, manual = false
             FROM input i WHERE d.message_id = i.message_id AND d.endpoint_id = i.endpoint_id
               AND (i.lease IS NULL OR (d.status = $17 AND d.next_attempt_at = i.lease))
             RETURNING d.message_id, d.endpoint_id
         ), logged AS (
             INSERT INTO attempts (id, message_id, endpoint_id, url, response_status_code,
                 response, response_head, response_duration_ms, status, trigger_type, created_at)
             SELECT i.attempt_id, i.message_id, i.endpoint_id, i.url, i.response_status_code,
                 i.response, i.response_head, i.response_duration_ms, i.attempt_status,
                 i.trigger_type, i.created_at
             FROM input i WHERE EXISTS (SELECT 1 FROM deliveries d
                 WHERE d.message_id = i.message_id AND d.endpoint_id = i.endpoint_id)
             RETURNING message_id, endpoint_id
         )
         SELECT l.message_id, l.endpoint_id, m.message_id IS NOT NULL FROM logged l
         LEFT JOIN moved m ON m.message_id = l.message_id AND m.endpoint_id = l.endpoint_id",
    )
    .bind(&message_ids)
    .bind(&endpoint_ids)
    .bind(number(|r| i64::from(r.next.status.code())))
    .bind(number(|r| i64::from(r.next.attempt_count)))
    .bind(&next_attempt_at)
    .bind(number(|r| r.next.updated_at.as_millis()))
    .bind(column(|r| r.attempt.id.to_string()))
    .bind(column(|r| r.attempt.url.clone()))
    .bind(number(|r| i64::from(r.attempt.response_status_code)))
    .bind(column(|r| r.attempt.response.clone()))
    .bind(column(|r| r.attempt.response_head.clone()))
    .bind(number(|r| r.attempt.response_duration_ms))
    .bind(number(|r| i64::from(r.attempt.status.code())))
    .bind(number(|r| i64::from(r.attempt.trigger_type.code())))
    .bind(number(|r| r.attempt.created_at.as_millis()))
    .bind(
        batch
            .iter()
            .map(|r| r.lease.map(Timestamp::as_millis))
            .collect::<Vec<_>>(),
    )
    .bind(i64::from(DeliveryStatus::Sending.code()))
    .persistent(false)
    .fetch_all(&mut *tx)
    .await
    .map_err(missing("delivery"))?;
    Ok(logged
        .into_iter()
        .map(|(message, endpoint, moved)| ((message, endpoint), moved))
        .collect())
}

/// Keeps every process's claims off the endpoints that asked to slow down until the latest
/// `hold_until` of each: a claim skips an endpoint whose `next_window_at` is still ahead, and
/// the hold only ever lengthens a window. Runs only when a batch holds such an answer.
async fn hold_endpoints(
    tx: &mut PgConnection,
    records: &[AttemptRecord],
    recorded: &[Recorded],
) -> Result<(), StoreError> {
    // In key order, as the endpoints were locked.
    let mut until: BTreeMap<&str, i64> = BTreeMap::new();
    for (record, recorded) in records.iter().zip(recorded) {
        let Some(hold) = record.hold_until.filter(|_| *recorded != Recorded::Gone) else {
            continue;
        };
        let latest = until.entry(record.next.endpoint_id.as_str()).or_default();
        *latest = (*latest).max(hold.as_millis());
    }
    if until.is_empty() {
        return Ok(());
    }
    let (ids, untils): (Vec<&str>, Vec<i64>) = until.into_iter().unzip();
    sqlx::query(
        "UPDATE endpoints e SET next_window_at = GREATEST(COALESCE(e.next_window_at, 0), v.until)
         FROM unnest($1::text[], $2::bigint[]) v(id, until) WHERE e.id = v.id",
    )
    .bind(&ids)
    .bind(&untils)
    .persistent(false)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// One endpoint's failure streak through the batch.
#[derive(Debug, Default)]
struct Streak {
    /// As read under the endpoint's lock.
    before: Option<i64>,
    /// After the batch's attempts, in the order they were made.
    after: Option<i64>,
    /// Whether the batch holds a success: the streak read ended, and any after it starts anew.
    broken: bool,
}

/// Writes each endpoint's failure streak as its recorded attempts leave it (a success ends it,
/// a failure starts one unless started) and answers, per record, when the streak it belongs to
/// began (`None` for a success or an unwritten record).
async fn write_streaks(
    tx: &mut PgConnection,
    records: &[AttemptRecord],
    recorded: &[Recorded],
    read: &HashMap<String, Option<i64>>,
) -> Result<Vec<Option<Timestamp>>, StoreError> {
    let mut streaks: HashMap<&str, Streak> = HashMap::new();
    let mut since = vec![None; records.len()];
    let written = made_order(records)
        .into_iter()
        .filter(|&i| matches!(recorded[i], Recorded::Written { .. }));
    for i in written {
        let a = &records[i].attempt;
        let endpoint = a.endpoint_id.as_str();
        let streak = streaks.entry(endpoint).or_insert_with(|| {
            let before = read.get(endpoint).copied().flatten();
            Streak {
                before,
                after: before,
                broken: false,
            }
        });
        if a.status == DeliveryStatus::Success {
            streak.broken = true;
            streak.after = None;
        } else {
            streak.after = Some(streak.after.unwrap_or(a.created_at.as_millis()));
            since[i] = streak.after;
        }
    }
    // Another process may have started the endpoint's streak since it was read: without a
    // success here, keep the earlier start (COALESCE), and answer the stored one.
    let changed: Vec<(&str, &Streak)> = streaks
        .iter()
        .filter(|(_, s)| s.after != s.before)
        .map(|(e, s)| (*e, s))
        .collect();
    if changed.is_empty() {
        return Ok(since
            .into_iter()
            .map(|s| s.map(Timestamp::from_millis))
            .collect());
    }
    // Planned for each batch, like the write above; it runs only when a streak changes.
    let stored: Vec<(String, Option<i64>)> = sqlx::query_as(
        "UPDATE endpoints e
     SET failing_since = CASE WHEN v.broken THEN v.after
                              ELSE COALESCE(e.failing_since, v.after) END
     FROM unnest($1::text[], $2::bigint[], $3::boolean[]) v(id, after, broken)
     WHERE e.id = v.id
     RETURNING e.id, e.failing_since",
    )
    .bind(changed.iter().map(|(e, _)| *e).collect::<Vec<_>>())
    .bind(changed.iter().map(|(_, s)| s.after).collect::<Vec<_>>())
    .bind(changed.iter().map(|(_, s)| s.broken).collect::<Vec<_>>())
    .persistent(false)
    .fetch_all(&mut *tx)
    .await?;
    let stored: HashMap<String, Option<i64>> = stored.into_iter().collect();
    for (i, slot) in since.iter_mut().enumerate() {
        let endpoint = records[i].attempt.endpoint_id.as_str();
        let (Some(started), Some(Some(kept))) = (*slot, stored.get(endpoint)) else {
            continue;
        };
        // The last streak of the batch is the one stored; earlier ones ended in the batch.
        if streaks[endpoint].after == Some(started) {
            *slot = Some(*kept);
        }
    }
    Ok(since
        .into_iter()
        .map(|s| s.map(Timestamp::from_millis))
        .collect())
}
