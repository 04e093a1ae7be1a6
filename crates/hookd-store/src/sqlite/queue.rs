//! [`DeliveryQueue`] on SQLite.
//!
//! Every queue write runs in one [`super::Db::write`] closure. The single writer thread makes a
//! claim atomic without row locks: no other write can run between choosing the due rows and
//! marking them `sending`, so two claimers never get the same delivery.
//!
//! Each job of the queue has its own file: `claim`, `record` and `recover` (resends and an
//! ordering key's next too); this one implements the trait over them, each method one job of
//! the writer.

use std::collections::{BTreeSet, HashMap};
use std::sync::Weak;

use async_trait::async_trait;
use hookd_core::model::{Delivery, DeliveryStatus, Message};
use hookd_core::{EndpointId, MessageId, Timestamp};
use rusqlite::{OptionalExtension, params};

use super::claim::claim;
use super::endpoints::require_endpoint;
use super::publish::insert_events;
use super::record::{hand_off_next_in_order, missing_parent, record};
use super::recover::{RECOVER, RECOVER_CHUNK, queue_next_in_order, resend_one};
use super::{SqliteStore, missing};
use crate::json::encode;
use crate::{
    AttemptRecord, ClaimRequest, ClaimedDelivery, DeliveryQueue, Handoff, HandoffMode, Recorded,
    Skipped, StoreError, skip_refused,
};

#[async_trait]
impl DeliveryQueue for SqliteStore {
    async fn claim_due(&self, request: &ClaimRequest) -> Result<Vec<ClaimedDelivery>, StoreError> {
        if request.limit == 0 {
            return Ok(Vec::new());
        }
        let request = request.clone();
        self.db.write(move |conn| claim(conn, &request)).await
    }

    async fn record_attempts(
        &self,
        records: &[AttemptRecord],
    ) -> Result<Vec<Recorded>, StoreError> {
        let (records, handoff) = (records.to_vec(), self.handoff());
        let (recorded, handed) = self
            .db
            .write(move |conn| {
                let mut order: Vec<usize> = (0..records.len()).collect();
                order.sort_by_key(|&i| records[i].attempt.created_at);
                let mut recorded = vec![Recorded::Gone; records.len()];
                for i in order {
                    recorded[i] = record(conn, &records[i])?;
                }
                let handed = match handoff.as_deref() {
                    Some(handoff) => hand_off_next_in_order(conn, handoff, &records, &recorded)?,
                    None => Vec::new(),
                };
                Ok((recorded, handed))
            })
            .await?;
        for (claimed, reserved) in handed {
            reserved.start(claimed);
        }
        Ok(recorded)
    }

    async fn disable_endpoint(
        &self,
        endpoint: &EndpointId,
        reason: &str,
        at: Timestamp,
        events: &[Message],
    ) -> Result<bool, StoreError> {
        let (endpoint, reason, events) = (endpoint.clone(), reason.to_owned(), events.to_vec());
        self.db
            .write(move |conn| {
                let rows = conn
                    .prepare_cached(
                        "UPDATE endpoints SET disabled = 1, disabled_reason = ?2, disabled_at = ?3,
                         updated_at = ?3 WHERE id = ?1 AND NOT disabled",
                    )?
                    .execute(params![endpoint.as_str(), reason, at.as_millis()])?;
                if rows == 0 {
                    require_endpoint(conn, &endpoint)?;
                    return Ok(false);
                }
                insert_events(conn, &events)?;
                Ok(true)
            })
            .await
    }

    async fn resend(
        &self,
        message: &MessageId,
        endpoint: &EndpointId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let (message, endpoint) = (message.clone(), endpoint.clone());
        self.db
            .write(move |conn| {
                // A delivery in flight (`sending`) is left alone: the update's WHERE fails. One
                // with an ordering key is written waiting, then the oldest waiting of its key
                // queued unless one is (it may be this one).
                let queued = resend_one(conn, &message, &endpoint, now);
                match queued {
                    Ok(Some(key)) => {
                        if let Some(key) = key {
                            queue_next_in_order(conn, &endpoint, &key, now)?;
                        }
                        Ok(true)
                    }
                    Ok(None) => Ok(false),
                    // SQLite does not say which parent is missing: look.
                    Err(error) => Err(match missing("message")(error) {
                        StoreError::NotFound(_) => missing_parent(conn, &message)?,
                        other => other,
                    }),
                }
            })
            .await
    }

    async fn recover(
        &self,
        endpoint: &EndpointId,
        since: Timestamp,
        until: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        let mut recovered = 0;
        loop {
            let endpoint = endpoint.clone();
            let requeued = self
                .db
                .write(move |conn| {
                    let keys = conn
                        .prepare_cached(&RECOVER)?
                        .query_map(
                            params![
                                endpoint.as_str(),
                                DeliveryStatus::Pending.code(),
                                since.as_millis(),
                                until.map(Timestamp::as_millis),
                                now.as_millis(),
                                DeliveryStatus::Fail.code(),
                            ],
                            |row| row.get::<_, Option<String>>(0),
                        )?
                        .collect::<Result<Vec<_>, _>>()?;
                    let requeued = keys.len() as u64;
                    let keys: BTreeSet<String> = keys.into_iter().flatten().collect();
                    for key in &keys {
                        queue_next_in_order(conn, &endpoint, key, now)?;
                    }
                    Ok(requeued)
                })
                .await?;
            recovered += requeued;
            if requeued < RECOVER_CHUNK {
                return Ok(recovered);
            }
        }
    }

    async fn skip(
        &self,
        message: &MessageId,
        endpoint: &EndpointId,
        now: Timestamp,
    ) -> Result<Skipped, StoreError> {
        let (message, endpoint) = (message.clone(), endpoint.clone());
        self.db
            .write(move |conn| {
                let skipped = conn
                    .prepare_cached(
                        "UPDATE deliveries SET status = ?3, next_attempt_at = NULL, updated_at = ?4,
                         manual = 0 WHERE message_id = ?1 AND endpoint_id = ?2 AND status = ?5
                         RETURNING ordering_key",
                    )?
                    .query_row(
                        params![
                            message.as_str(),
                            endpoint.as_str(),
                            DeliveryStatus::Fail.code(),
                            now.as_millis(),
                            DeliveryStatus::Pending.code(),
                        ],
                        |row| row.get::<_, Option<String>>(0),
                    )
                    .optional()?;
                if let Some(key) = skipped {
                    if let Some(key) = key {
                        queue_next_in_order(conn, &endpoint, &key, now)?;
                    }
                    return Ok(Skipped::Skipped);
                }
                let status: Option<i64> = conn
                    .prepare_cached(
                        "SELECT status FROM deliveries WHERE message_id = ?1 AND endpoint_id = ?2",
                    )?
                    .query_row(params![message.as_str(), endpoint.as_str()], |row| {
                        row.get(0)
                    })
                    .optional()?;
                skip_refused(status)
            })
            .await
    }

    async fn heads_of(
        &self,
        keys: &[(EndpointId, String)],
    ) -> Result<HashMap<(EndpointId, String), MessageId>, StoreError> {
        let pairs: Vec<(&str, &str)> = keys.iter().map(|(e, k)| (e.as_str(), k.as_str())).collect();
        let pairs = encode(&pairs);
        self.db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT h.endpoint_id, h.ordering_key, h.message_id FROM json_each(?1) p
                     JOIN deliveries h ON h.endpoint_id = p.value ->> 0
                      AND h.ordering_key = p.value ->> 1 AND h.next_attempt_at IS NOT NULL",
                )?;
                let heads = stmt
                    .query_map([pairs], |row| {
                        Ok((
                            (EndpointId::from_stored(row.get(0)?), row.get(1)?),
                            MessageId::from_stored(row.get(2)?),
                        ))
                    })?
                    .collect::<Result<_, _>>()?;
                Ok(heads)
            })
            .await
    }

    async fn release_claims(
        &self,
        claimed: &[Delivery],
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        if claimed.is_empty() {
            return Ok(0);
        }
        let claimed = claimed.to_vec();
        self.db
            .write(move |conn| {
                let mut release = conn.prepare_cached(
                    "UPDATE deliveries SET status = ?4, next_attempt_at = ?5, updated_at = ?5
                     WHERE message_id = ?1 AND endpoint_id = ?2 AND status = ?6
                     AND next_attempt_at = ?3",
                )?;
                let mut released = 0;
                for d in &claimed {
                    released += release.execute(params![
                        d.message_id.as_str(),
                        d.endpoint_id.as_str(),
                        d.next_attempt_at.map(Timestamp::as_millis),
                        DeliveryStatus::Pending.code(),
                        now.as_millis(),
                        DeliveryStatus::Sending.code(),
                    ])? as u64;
                }
                Ok(released)
            })
            .await
    }

    fn hand_off_new_deliveries(&self, handoff: Weak<dyn Handoff>) -> HandoffMode {
        *self.handoff.write().expect("handoff lock poisoned") = Some(handoff);
        HandoffMode::Sole
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use rusqlite::{Connection, StatementStatus};

    use super::super::claim::{OLDEST_DUE, READY_ENDPOINTS};
    use super::super::writer::Tx;

    use super::*;

    /// A migrated database in `dir` with application `app_1`, its endpoint `ep_1` and
    /// messages `msg_1` and `msg_2`; its path and a connection to it.
    fn one_endpoint(dir: &tempfile::TempDir) -> (std::path::PathBuf, Connection) {
        let path = dir.path().join("hookd.db");
        let conn = super::super::writer::migrated(&path);
        conn.execute_batch(super::super::writer::TWO_MESSAGES_TO_ONE_ENDPOINT)
            .unwrap();
        (path, conn)
    }

    /// A claim at `at` ms of at most `limit` deliveries, 4 an endpoint, under a 90 s lease.
    fn request(at: i64, limit: usize) -> ClaimRequest {
        let now = Timestamp::from_millis(at);
        ClaimRequest {
            now,
            lease_until: now.plus(Duration::from_secs(90)),
            limit,
            per_endpoint: 4,
            rooms: HashMap::new(),
            ceiling: 4,
        }
    }

    #[test]
    fn claims_of_different_sizes_reuse_their_prepared_queries() {
        let dir = tempfile::tempdir().unwrap();
        let (_, conn) = one_endpoint(&dir);
        conn.execute_batch(
            "INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
                 next_attempt_at, updated_at)
                 VALUES ('msg_1', 'ep_1', 0, 0, 0, 0), ('msg_2', 'ep_1', 0, 0, 0, 0);",
        )
        .unwrap();
        let tx = Tx::watching(&conn);
        for (limit, at) in [(7, 1_000), (1, 2_000), (30, 3_000)] {
            claim(&tx, &request(at, limit)).unwrap();
        }
        for sql in [READY_ENDPOINTS, OLDEST_DUE.sqlite()] {
            let status = |s: &mut rusqlite::Statement<'_>| {
                Ok::<_, rusqlite::Error>(s.get_status(StatementStatus::RePrepare))
            };
            assert_eq!(tx.kept(sql, status).unwrap(), 0, "{sql}");
        }
    }

    #[tokio::test]
    async fn a_recover_of_more_than_a_chunk_requeues_every_failed_delivery() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = one_endpoint(&dir);
        let failed = 2 * RECOVER_CHUNK + RECOVER_CHUNK / 2;
        conn.execute_batch(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {failed})
             INSERT INTO messages (id, app_id, event_type, payload, created_at)
             SELECT 'msg_failed_' || i, 'app_1', 't', x'7b7d', 0 FROM n;
             INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count, updated_at)
             SELECT id, 'ep_1', {}, 10, 0 FROM messages WHERE id LIKE 'msg_failed_%';",
            DeliveryStatus::Fail.code()
        ))
        .unwrap();
        let store = SqliteStore::open(&path).await.unwrap();
        let (ep, now) = (
            EndpointId::from_stored("ep_1".into()),
            Timestamp::from_millis(5),
        );
        let recovered = store.recover(&ep, Timestamp::from_millis(0), None, now);
        assert_eq!(recovered.await.unwrap(), failed);
        let pending: i64 = conn
            .query_row(
                "SELECT count(*) FROM deliveries WHERE status = ?1 AND next_attempt_at = 5",
                [DeliveryStatus::Pending.code()],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(pending as u64, failed);
    }

    /// SQLite's query plan for `sql` (its parameters unbound), one step a line.
    fn plan(conn: &Connection, sql: &str) -> String {
        let mut explain = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let mut rows = explain.raw_query();
        let mut steps = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            steps.push(row.get::<_, String>(3).unwrap());
        }
        steps.join("\n")
    }

    #[test]
    fn searches_for_deliveries_not_delivered_use_their_partial_index() {
        let dir = tempfile::tempdir().unwrap();
        let (_, conn) = one_endpoint(&dir);
        let by_status = "deliveries_by_endpoint_status (endpoint_id=? AND status=?)";
        let messages = format!(
            "SELECT m.id FROM messages m WHERE {}",
            crate::sql::search::delivery_status_condition(DeliveryStatus::Fail)
        );
        let endpoint = EndpointId::from_stored("ep_1".into());
        // The first page of the endpoint's deliveries in `status`.
        let endpoint_list = |status| {
            crate::sql::messages::endpoint_first_page(
                crate::sql::Dialect::Sqlite,
                &endpoint,
                status,
            )
            .sql
        };
        let failed = endpoint_list(DeliveryStatus::Fail);
        for sql in [messages.as_str(), &failed, &RECOVER] {
            let plan = plan(&conn, sql);
            assert!(plan.contains(by_status), "{sql}\n{plan}");
        }
        // Delivered ones are not in it: an endpoint's delivered list walks its deliveries.
        let delivered = endpoint_list(DeliveryStatus::Success);
        assert!(plan(&conn, &delivered).contains("deliveries_by_endpoint "));
    }

    #[test]
    fn a_claim_reads_an_endpoints_oldest_due_deliveries_by_its_due_index() {
        let dir = tempfile::tempdir().unwrap();
        let (_, conn) = one_endpoint(&dir);
        let plan = plan(&conn, OLDEST_DUE.sqlite());
        // Stepped in due order through the index, each message found by its key: no sort, no
        // scan of either table.
        assert!(plan.contains("deliveries_endpoint_due"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        assert!(!plan.contains("SCAN"), "{plan}");
    }

    #[test]
    fn a_claim_steps_through_the_endpoints_with_queued_deliveries_not_every_endpoint() {
        let dir = tempfile::tempdir().unwrap();
        let (_, conn) = one_endpoint(&dir);
        conn.execute_batch(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
             INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers,
                 secret, created_at, updated_at)
             SELECT 'ep_idle_' || i, 'app_1', 'http://localhost/', '', 0, '{}', '{}', 's', 0, 0
             FROM n;
             INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count,
                 next_attempt_at, updated_at)
                 VALUES ('msg_1', 'ep_1', 0, 0, 0, 0);",
        )
        .unwrap();
        let tx = Tx::watching(&conn);
        let claimed = claim(&tx, &request(1_000, 8)).unwrap();
        assert_eq!(claimed.len(), 1);
        let status = |s: &mut rusqlite::Statement<'_>| {
            Ok::<_, rusqlite::Error>(s.get_status(StatementStatus::FullscanStep))
        };
        let scanned = tx.kept(READY_ENDPOINTS, status).unwrap();
        assert!(scanned < 10, "the claim stepped through {scanned} rows");
    }
}
