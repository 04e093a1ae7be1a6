//! The [`DeliveryQueue`](crate::DeliveryQueue)'s claim on PostgreSQL, where several processes
//! claim from one table at once.
//!
//! A claim locks its candidate rows with `FOR UPDATE SKIP LOCKED`: a row another claimer holds
//! is skipped rather than waited for, and a row another claimer has already marked `sending`
//! fails the due-time check when re-read after its lock is released. So concurrent claimers
//! never get the same delivery.
//!
//! Per-endpoint limits hold across every process on the database, not per process (unless
//! [`PgStore::with_cluster_limits`] turned that off): claims take turns under one
//! transaction-scoped advisory lock, so each claim sees every earlier claim committed, and
//! counts an endpoint's deliveries in flight (`sending` with a live lease) against its
//! ceiling. The claim is one statement, a call of the function `claim_due` (migration
//! 0008; 0009 locks no more of an endpoint's rows than the claim may take; 0012 looks only at
//! endpoints with deliveries queued, and reads every row by key; 0014 takes each endpoint's
//! room as the claimer asks, under the endpoint's own ceiling), which takes the
//! lock, claims and commits inside the server: the turn never waits on a round trip to a
//! claimer, which on a busy machine may not be scheduled to send its `COMMIT` for
//! milliseconds. Nor on the WAL flush: the claim's commit does not wait for it. A
//! claim lost with the server leaves its deliveries due, as an expired lease does, and they are
//! sent again (at least once); the next record's commit flushes every claim before it.
//! A rate-limited endpoint gives at most one second's worth
//! of attempts to one claim and records when the next claim may take more
//! (`endpoints.next_window_at`); the claiming process spaces those attempts out itself. A
//! record moves that window too, when an endpoint asked to slow down (see `record`).

use std::sync::LazyLock;

use sqlx::AssertSqlSafe;

use super::{PgStore, rows};
use crate::columns::{DELIVERY_COLUMNS, ENDPOINT_COLUMNS, MESSAGE_COLUMNS};
use crate::{ClaimRequest, ClaimedDelivery, StoreError};

/// A claim: `claim_due` (see the module doc) answers whole table rows, unpacked here into the
/// columns the decoder reads. Built once; claims are on every delivery's path.
static CLAIM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {DELIVERY_COLUMNS}, d.manual, {MESSAGE_COLUMNS}, {ENDPOINT_COLUMNS}
         FROM claim_due($1, $2, $3, $4, $5, $6, $7, $8) c
         CROSS JOIN LATERAL (SELECT (c.delivery).*) d
         CROSS JOIN LATERAL (SELECT (c.message).*) m
         CROSS JOIN LATERAL (SELECT (c.endpoint).*) e
         ORDER BY c.due, d.message_id, d.endpoint_id"
    )
});

impl PgStore {
    /// Claims what `request` asks for; see [`crate::DeliveryQueue::claim_due`].
    pub(super) async fn claim(
        &self,
        request: &ClaimRequest,
    ) -> Result<Vec<ClaimedDelivery>, StoreError> {
        if request.limit == 0 || request.ceiling == 0 {
            return Ok(Vec::new());
        }
        let (room_ids, room_n): (Vec<&str>, Vec<i64>) = request
            .rooms
            .iter()
            .map(|(id, room)| (id.as_str(), sql_count(*room)))
            .unzip();
        let rows = sqlx::query(AssertSqlSafe(CLAIM.as_str()))
            .bind(request.now.as_millis())
            .bind(&room_ids)
            .bind(&room_n)
            .bind(sql_count(request.limit))
            .bind(sql_count(request.per_endpoint))
            .bind(sql_count(request.ceiling))
            .bind(request.lease_until.as_millis())
            .bind(self.cluster_limits)
            .fetch_all(&self.pool)
            .await?;
        let mut claimed = rows::ClaimedRows::default();
        rows.iter().map(|row| claimed.decode(row)).collect()
    }
}

/// A count as PostgreSQL binds it.
fn sql_count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
