//! Fixtures of the PostgreSQL-only tests: applications, endpoints and messages made at
//! fixed times, queues of due deliveries, and claims as several processes make them.
//! Each test binary uses part of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use hookd_core::model::{Application, Endpoint, Message, SealedKeys};
use hookd_core::{AppId, EndpointId, MessageId, Timestamp};
use hookd_store::postgres::PgStore;
use hookd_store::prelude::*;
use hookd_store::{ClaimRequest, NewMessage};
use sqlx::Connection;

pub fn app(id: &str) -> Application {
    Application {
        id: AppId::from_stored(id.to_owned()),
        uid: None,
        name: id.to_owned(),
        metadata: BTreeMap::new(),
        throttle_rate: None,
        envelope: false,
        created_at: Timestamp::from_millis(0),
        updated_at: Timestamp::from_millis(0),
    }
}

/// An endpoint of `owner` created at `created` ms, limited to `rate` attempts a second.
pub fn endpoint_of(owner: &Application, created: i64, rate: Option<u16>) -> Endpoint {
    let created = Timestamp::from_millis(created);
    Endpoint {
        id: EndpointId::new(created),
        app_id: owner.id.clone(),
        uid: None,
        url: "https://example.com/hook".into(),
        description: String::new(),
        event_types: None,
        channels: None,
        disabled: false,
        disabled_reason: None,
        disabled_at: None,
        throttle_rate: rate,
        timeout_secs: None,
        max_concurrency: None,
        ordering: Default::default(),
        metadata: BTreeMap::new(),
        headers: BTreeMap::new(),
        keys: SealedKeys::from_stored("hk1:test:sealed".into()),
        created_at: created,
        updated_at: created,
        destination: Default::default(),
        batch_size: 1,
        max_wait_secs: 0,
    }
}

/// Creates `owner` and its `endpoints`, then `messages` messages (created at 0, 1, … ms), so
/// that every endpoint has that many deliveries due.
pub async fn queue(store: &PgStore, owner: &Application, endpoints: &[Endpoint], messages: i64) {
    store.create_app(owner).await.unwrap();
    for endpoint in endpoints {
        store.create_endpoint(endpoint).await.unwrap();
    }
    for i in 0..messages {
        let created = store
            .publish(NewMessage::new(message_of(owner, i)))
            .await
            .unwrap();
        assert_eq!(created.deliveries, endpoints.len());
    }
}

/// A message of `owner` created at `created` ms.
pub fn message_of(owner: &Application, created: i64) -> Message {
    let created = Timestamp::from_millis(created);
    Message {
        id: MessageId::new(created),
        app_id: owner.id.clone(),
        event_type: "order.shipped".into(),
        event_id: None,
        channels: None,
        ordering_key: None,
        tags: None,
        deliver_at: None,
        payload: Some(b"{}".to_vec()),
        created_at: created,
    }
}

/// A claim at `now` (unix ms) of up to 100 deliveries, `per_endpoint` at most each, leased
/// for a minute.
pub fn claim_at(now: i64, per_endpoint: usize) -> ClaimRequest {
    ClaimRequest {
        now: Timestamp::from_millis(now),
        lease_until: Timestamp::from_millis(now + 60_000),
        limit: 100,
        per_endpoint,
        rooms: Default::default(),
        ceiling: per_endpoint,
    }
}

/// Four stores on `url` with their own pools, as four processes would be.
pub async fn four_claimers(url: &str) -> Vec<PgStore> {
    futures::future::join_all((0..4).map(|_| PgStore::connect(url)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

/// What four claimers (own pools, as four processes) claim at once at `now`, per endpoint.
pub async fn claim_everywhere(
    claimers: &[PgStore],
    now: i64,
    per_endpoint: usize,
) -> BTreeMap<String, usize> {
    let request = claim_at(now, per_endpoint);
    let claims = claimers.iter().map(|store| store.claim_due(&request));
    let mut counts = BTreeMap::new();
    for claimed in futures::future::join_all(claims).await {
        for c in claimed.unwrap() {
            *counts.entry(c.endpoint.id.to_string()).or_default() += 1;
        }
    }
    counts
}

/// Another process's claim in its turn, on a connection of its own: it holds the claims' lock
/// and leases three deliveries, the endpoint's whole cap (as `claim_at(_, 3)`), not yet
/// committed. `COMMIT` on the connection ends its turn.
pub async fn a_claim_in_its_turn(url: &str) -> sqlx::PgConnection {
    let mut other = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut other).await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(448546171748)")
        .execute(&mut other)
        .await
        .unwrap();
    let leased = sqlx::query(
        "UPDATE hookd.deliveries SET status = 3, next_attempt_at = 61000
         WHERE message_id IN (SELECT message_id FROM hookd.deliveries
                              ORDER BY next_attempt_at LIMIT 3)",
    )
    .execute(&mut other)
    .await
    .unwrap();
    assert_eq!(leased.rows_affected(), 3);
    other
}

/// Waits (bounded) until a session of this database waits for a row lock.
pub async fn wait_for_a_lock_wait(pool: &sqlx::PgPool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "nobody ever waited");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
