//! PostgreSQL-specific guarantees of claims, as several processes make them on one database:
//! no delivery claimed twice, endpoint limits and slow-downs held across processes, claims
//! taking turns, and an endpoint update racing hookd's own disabling. Skipped like the
//! suite's `postgres::` cases when `HOOKD_TEST_POSTGRES_URL` is unset.

mod pg_fixtures;

use std::collections::BTreeSet;
use std::time::Duration;

use hookd_core::model::{Attempt, Delivery, DeliveryStatus, Endpoint, TriggerType};
use hookd_core::operations::{DisableTrigger, EndpointRef, OperationalEvent};
use hookd_core::{AttemptId, Timestamp};
use hookd_store::postgres::PgStore;
use hookd_store::prelude::*;
use hookd_store::testing::fresh_postgres;
use hookd_store::{AttemptRecord, ClaimRequest, EndpointUpdate, ensure_operations_app};
use sqlx::Connection;

use pg_fixtures::*;

#[tokio::test]
async fn concurrent_claimers_never_get_the_same_delivery() {
    let Some((url, _db)) = fresh_postgres("postgres_only::concurrent_claims").await else {
        return;
    };
    let setup = PgStore::connect(&url).await.unwrap();
    let owner = app("app_claims");
    // 20 endpoints × 100 messages: 2,000 due deliveries.
    let endpoints: Vec<Endpoint> = (0..20).map(|i| endpoint_of(&owner, i, None)).collect();
    queue(&setup, &owner, &endpoints, 100).await;
    // Four claimers with their own pools, as four processes would be.
    let mut claimers = Vec::new();
    for _ in 0..4 {
        let store = PgStore::connect(&url).await.unwrap();
        claimers.push(tokio::spawn(async move {
            let request = ClaimRequest {
                now: Timestamp::from_millis(1_000),
                lease_until: Timestamp::from_millis(1_000_000),
                limit: 25,
                // A cap no endpoint reaches: this test is about claimers racing for rows (the
                // cluster-wide caps have their own test below).
                per_endpoint: 100,
                rooms: Default::default(),
                ceiling: 100,
            };
            let mut mine = Vec::new();
            for _ in 0..10_000 {
                let claimed = store.claim_due(&request).await.unwrap();
                if claimed.is_empty() {
                    // Empty either because everything is claimed, or because the others hold
                    // every candidate right now.
                    let pending: i64 =
                        sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE status = 1")
                            .fetch_one(store.pool())
                            .await
                            .unwrap();
                    if pending == 0 {
                        return mine;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                assert!(claimed.len() <= 25);
                mine.extend(
                    claimed
                        .into_iter()
                        .map(|c| (c.delivery.message_id, c.delivery.endpoint_id)),
                );
            }
            panic!("the claimer never saw the queue empty");
        }));
    }
    let mut all = Vec::new();
    for claimer in claimers {
        all.extend(claimer.await.unwrap());
    }
    let distinct: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(distinct.len(), all.len(), "a delivery was claimed twice");
    assert_eq!(all.len(), 2_000);
    let sending: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE status = 3")
        .fetch_one(setup.pool())
        .await
        .unwrap();
    assert_eq!(sending, 2_000);
}

#[tokio::test]
async fn endpoint_limits_hold_across_processes() {
    let Some((url, _db)) = fresh_postgres("postgres_only::cluster_limits").await else {
        return;
    };
    let setup = PgStore::connect(&url).await.unwrap();
    let owner = app("app_limits");
    let capped = endpoint_of(&owner, 1, None);
    let throttled = endpoint_of(&owner, 2, Some(2));
    queue(&setup, &owner, &[capped.clone(), throttled.clone()], 50).await;
    let claimers = four_claimers(&url).await;
    let (capped, throttled) = (capped.id.to_string(), throttled.id.to_string());

    // Concurrency 3 in all, whichever process claims; the rate-limited endpoint gives one
    // second of its rate (2) to the first claim.
    let first = claim_everywhere(&claimers, 1_000, 3).await;
    assert_eq!(first.get(&capped), Some(&3), "{first:?}");
    assert_eq!(first.get(&throttled), Some(&2), "{first:?}");
    // Nothing more while those are in flight and inside the rate window.
    let busy = claim_everywhere(&claimers, 1_999, 3).await;
    assert!(busy.is_empty(), "{busy:?}");
    // The rate window has passed; the throttled endpoint has room for one more under its cap.
    let next_window = claim_everywhere(&claimers, 2_000, 3).await;
    assert_eq!(next_window.get(&throttled), Some(&1), "{next_window:?}");
    assert_eq!(next_window.get(&capped), None, "{next_window:?}");
    // Leases that ran out (a process died) no longer count: the cap is free again.
    let after_leases = claim_everywhere(&claimers, 61_001, 3).await;
    assert_eq!(after_leases.get(&capped), Some(&3), "{after_leases:?}");
}

/// An endpoint that answered 429 (or 502–504) gets no new work from any process until the
/// time its answer asked for, though its cap has room and its deliveries are due.
#[tokio::test]
async fn an_endpoint_that_asked_to_slow_down_is_held_for_every_process() {
    let Some((url, _db)) = fresh_postgres("postgres_only::slow_down").await else {
        return;
    };
    let setup = PgStore::connect(&url).await.unwrap();
    let owner = app("app_slow_down");
    let endpoint = endpoint_of(&owner, 1, None);
    queue(&setup, &owner, std::slice::from_ref(&endpoint), 10).await;
    let told = setup
        .claim_due(&claim_at(1_000, 1))
        .await
        .unwrap()
        .remove(0);
    let at = Timestamp::from_millis;
    let answered = AttemptRecord {
        attempt: Attempt {
            id: AttemptId::new(at(1_100)),
            message_id: told.message.id.clone(),
            endpoint_id: endpoint.id.clone(),
            url: endpoint.url.clone(),
            response_status_code: 429,
            response: String::new(),
            response_head: "HTTP/1.1 429 Too Many Requests\r\nretry-after: 5\r\n".into(),
            response_duration_ms: 3,
            status: DeliveryStatus::Fail,
            trigger_type: TriggerType::Scheduled,
            created_at: at(1_100),
        },
        next: Delivery {
            status: DeliveryStatus::Pending,
            attempt_count: 1,
            next_attempt_at: Some(at(6_100)),
            updated_at: at(1_100),
            ..told.delivery.clone()
        },
        lease: told.delivery.next_attempt_at,
        hold_until: Some(at(6_100)),
        events: Vec::new(),
    };
    setup.record_attempts(&[answered]).await.unwrap();
    let claimers = four_claimers(&url).await;
    let held = claim_everywhere(&claimers, 6_099, 3).await;
    assert!(held.is_empty(), "claimed while held: {held:?}");
    let after = claim_everywhere(&claimers, 6_100, 3).await;
    assert_eq!(after.get(endpoint.id.as_str()), Some(&3), "{after:?}");
}

/// Claims take turns under one advisory lock, and a claim that waited for its turn counts the
/// deliveries every claim before it took, though they were committed after it began: its
/// snapshot is taken once the lock is granted. (Taken with the lock in one statement, it would
/// be older than the other claim's commit and fill the endpoint's cap a second time.)
#[tokio::test]
async fn a_claim_that_waited_its_turn_counts_the_claims_committed_meanwhile() {
    let Some((url, _db)) = fresh_postgres("postgres_only::claim_takes_turns").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let owner = app("app_turns");
    queue(&store, &owner, &[endpoint_of(&owner, 1, None)], 10).await;

    let mut turn = a_claim_in_its_turn(&url).await;

    let request = claim_at(1_000, 3);
    let claim = store.claim_due(&request);
    let commit_once_waited_for = async {
        wait_for_a_lock_wait(store.pool()).await;
        sqlx::query("COMMIT").execute(&mut turn).await.unwrap();
    };
    let (claimed, ()) = tokio::join!(claim, commit_once_waited_for);
    let claimed = claimed.unwrap();
    assert!(
        claimed.is_empty(),
        "the cap was full when its turn came, yet it claimed {}",
        claimed.len()
    );
}

/// An API update disabling an endpoint while hookd disables it (its transaction holding the
/// row) waits for it, and finds no transition to tell: `endpoint.disabled` is written once, by
/// whoever disabled it. (SQLite runs writes one at a time; there is no such race.)
#[tokio::test]
async fn an_update_racing_hookds_disabling_tells_no_second_disable() {
    let Some((url, _db)) = fresh_postgres("postgres_only::update_races_disable").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let ops = ensure_operations_app(&store, Timestamp::from_millis(0))
        .await
        .unwrap();
    let owner = app("app_race");
    store.create_app(&owner).await.unwrap();
    let ep = endpoint_of(&owner, 1, None);
    store.create_endpoint(&ep).await.unwrap();
    let about = EndpointRef::new(&owner, &ep);
    let at = Timestamp::from_millis(10);
    let updated = OperationalEvent::EndpointUpdated(about.clone()).message(&ops.id, at);
    let manual = OperationalEvent::EndpointDisabled {
        endpoint: about,
        fail_since: None,
        trigger: DisableTrigger::Manual,
        reason: "disabled through the API".into(),
    }
    .message(&ops.id, at);

    // hookd's disabling, not yet committed, as `disable_endpoint` writes it.
    let mut hookd = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut disabling = hookd.begin().await.unwrap();
    sqlx::query("UPDATE hookd.endpoints SET disabled = true WHERE id = $1")
        .bind(ep.id.as_str())
        .execute(&mut *disabling)
        .await
        .unwrap();
    let mut off = ep.clone();
    off.disabled = true;
    let change = EndpointUpdate {
        endpoint: &off,
        disabled_as_read: None,
        events: std::slice::from_ref(&updated),
        on_toggle: std::slice::from_ref(&manual),
        keys: None,
    };
    let update = store.update_endpoint_with(&change);
    let commit_once_waited_for = async {
        wait_for_a_lock_wait(store.pool()).await;
        disabling.commit().await.unwrap();
    };
    let (written, ()) = tokio::join!(update, commit_once_waited_for);
    written.unwrap();

    let stored = store.get_message(&ops.id, updated.id.as_str()).await;
    assert_eq!(stored.unwrap(), Some(updated));
    assert_eq!(
        store
            .get_message(&ops.id, manual.id.as_str())
            .await
            .unwrap(),
        None,
        "hookd disabled it first: the update is no transition"
    );
}
