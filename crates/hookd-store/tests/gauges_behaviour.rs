//! The `/metrics` side of the store and the graceful shutdown's, on every `Store`
//! implementation: the database-wide gauges (queue depth due and scheduled, claims in flight,
//! the oldest due delivery's wait, disabled endpoints, outbox lag), and giving back the claims
//! of attempts cut short so they are due at once.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use std::time::Duration;

use harness::fixtures::{app, at, endpoint};
use harness::queue::{LEASE_MS, app_with_endpoints, claim, delivery, publish, record};
use hookd_core::model::{Delivery, DeliveryStatus};
use hookd_core::{Clock, SystemClock};
use hookd_outbox::Event;
use hookd_store::prelude::*;
use hookd_store::{Gauges, NewMessage, RelayRules};

async fn gauges(store: &dyn Store, now_ms: i64) -> Gauges {
    store.gauges(at(now_ms)).await.unwrap()
}

async fn gauges_count_the_queue_of_enabled_endpoints(store: &dyn Store) {
    let empty = gauges(store, 0).await;
    assert_eq!(
        empty,
        Gauges {
            database_bytes: empty.database_bytes,
            ..Gauges::default()
        }
    );
    let (a, eps) = app_with_endpoints(store, 3).await;
    let msg = publish(store, &a, 10).await;
    let due = gauges(store, 100).await;
    assert_eq!((due.due, due.scheduled, due.in_flight), (3, 0, 0));
    assert_eq!(due.oldest_due_age, Duration::from_millis(90));

    // One claimed, one waiting for its retry at 5 000, one on an endpoint that is disabled.
    assert_eq!(claim(store, 100, 1, 1).await.len(), 1);
    let claimed_ep = claim_owner(store, &msg, &eps).await;
    let retrying = eps.iter().find(|e| e.id != claimed_ep).unwrap();
    record(
        store,
        &msg,
        retrying,
        100,
        DeliveryStatus::Pending,
        1,
        Some(5_000),
    )
    .await
    .unwrap();
    let idle = eps
        .iter()
        .find(|e| e.id != claimed_ep && e.id != retrying.id)
        .unwrap();
    store
        .disable_endpoint(&idle.id, "gone", at(150), &[])
        .await
        .unwrap();
    let waiting = gauges(store, 200).await;
    assert_eq!(
        waiting,
        Gauges {
            due: 0,
            scheduled: 1,
            in_flight: 1,
            oldest_due_age: Duration::ZERO,
            endpoints_disabled: 1,
            outbox_lag: Duration::ZERO,
            database_bytes: waiting.database_bytes,
        }
    );
    let retry_due = gauges(store, 6_000).await;
    assert_eq!((retry_due.due, retry_due.in_flight), (1, 1));
    assert_eq!(retry_due.oldest_due_age, Duration::from_secs(1));
    // A lease that ran out (its process died) is due again, not in flight.
    let expired = gauges(store, 100 + LEASE_MS + 1_000).await;
    assert_eq!(
        (expired.due, expired.scheduled, expired.in_flight),
        (2, 0, 0)
    );
    assert_eq!(
        expired.oldest_due_age,
        Duration::from_millis((100 + LEASE_MS + 1_000 - 5_000) as u64)
    );
}

/// The endpoint whose delivery of `msg` is claimed.
async fn claim_owner(
    store: &dyn Store,
    msg: &hookd_core::model::Message,
    eps: &[hookd_core::model::Endpoint],
) -> hookd_core::EndpointId {
    for ep in eps {
        if delivery(store, msg, ep).await.unwrap().status == DeliveryStatus::Sending {
            return ep.id.clone();
        }
    }
    panic!("nothing claimed");
}

async fn released_claims_are_due_at_once_and_others_untouched(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 3).await;
    let msg = publish(store, &a, 10).await;
    let claimed: Vec<Delivery> = claim(store, 20, 10, 10)
        .await
        .into_iter()
        .map(|c| c.delivery)
        .collect();
    assert_eq!(claimed.len(), 3);
    // One was recorded before the release reached it; one was claimed again by someone else
    // after its lease ran out (a different lease): neither is released.
    let recorded = claimed.iter().find(|d| d.endpoint_id == eps[0].id).unwrap();
    let recorded_ep = eps.iter().find(|e| e.id == recorded.endpoint_id).unwrap();
    record(
        store,
        &msg,
        recorded_ep,
        30,
        DeliveryStatus::Success,
        1,
        None,
    )
    .await
    .unwrap();
    let mut stale = claimed
        .iter()
        .find(|d| d.endpoint_id == eps[1].id)
        .unwrap()
        .clone();
    stale.next_attempt_at = stale
        .next_attempt_at
        .map(|t| t.plus(Duration::from_secs(1)));
    let others: Vec<Delivery> = claimed
        .iter()
        .filter(|d| d.endpoint_id != eps[1].id)
        .cloned()
        .chain([stale])
        .collect();
    assert_eq!(store.release_claims(&others, at(40)).await.unwrap(), 1);
    let released = delivery(store, &msg, &eps[2]).await.unwrap();
    assert_eq!(
        (
            released.status,
            released.next_attempt_at,
            released.attempt_count,
            released.updated_at
        ),
        (DeliveryStatus::Pending, Some(at(40)), 0, at(40))
    );
    assert_eq!(
        delivery(store, &msg, &eps[0]).await.unwrap().status,
        DeliveryStatus::Success
    );
    let still_leased = delivery(store, &msg, &eps[1]).await.unwrap();
    assert_eq!(
        (still_leased.status, still_leased.next_attempt_at),
        (DeliveryStatus::Sending, Some(at(20 + LEASE_MS)))
    );
    // Due at once: the next claim takes it, long before its old lease would have ended.
    let again = claim(store, 40, 10, 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].delivery.endpoint_id, eps[2].id);
    assert_eq!(store.release_claims(&[], at(50)).await.unwrap(), 0);
}

async fn the_database_size_grows_with_what_it_holds(store: &dyn Store) {
    let (a, _) = app_with_endpoints(store, 1).await;
    let before = gauges(store, 0).await.database_bytes;
    assert!(before > 0, "an empty schema has pages");
    // Bytes that do not compress: PostgreSQL would shrink a repeated one to nothing.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut noise = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state.to_le_bytes()[0]
    };
    for n in 0..200 {
        let mut msg = harness::fixtures::message(&a, "order.shipped", None, None, n);
        msg.payload = Some((0..8_192).map(|_| noise()).collect());
        store.publish(NewMessage::new(msg.clone())).await.unwrap();
    }
    let after = gauges(store, 0).await.database_bytes;
    assert!(
        after >= before + 200 * 8_192,
        "1.6 MB of payloads more: {before} -> {after} bytes"
    );
}

behaviour!(
    gauges_count_the_queue_of_enabled_endpoints,
    released_claims_are_due_at_once_and_others_untouched,
    the_database_size_grows_with_what_it_holds,
);

/// The outbox lag is the wait of the oldest row not yet relayed, on the database's clock.
async fn outbox_lag_is_the_oldest_waiting_row(store: &dyn Store, insert: impl AsyncFnOnce()) {
    let a = app(Some("acme"), 0);
    store.create_app(&a).await.unwrap();
    store
        .create_endpoint(&endpoint(&a, None, None, None))
        .await
        .unwrap();
    insert().await;
    // A minute from now, the row (written before now) has waited at least a minute.
    let later = SystemClock.now().plus(Duration::from_secs(60));
    let lag = store.gauges(later).await.unwrap().outbox_lag;
    assert!(
        lag >= Duration::from_secs(60) && lag < Duration::from_secs(3600),
        "{lag:?}"
    );
    let rules = RelayRules {
        strict_event_types: false,
        max_payload_bytes: 1024,
    };
    let relayed = store.relay_outbox(10, &rules, SystemClock.now()).await;
    assert_eq!(relayed.unwrap().messages, 1);
    assert_eq!(
        store.gauges(later).await.unwrap().outbox_lag,
        Duration::ZERO
    );
}

fn event() -> Event {
    Event::from_json_text("acme", "order.shipped", r#"{"order": 1}"#)
}

#[tokio::test]
async fn sqlite_outbox_lag_is_the_oldest_waiting_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hookd.db");
    let store = hookd_store::sqlite::SqliteStore::open(&path).await.unwrap();
    outbox_lag_is_the_oldest_waiting_row(&store, async || {
        let producer = rusqlite::Connection::open(&path).unwrap();
        event().insert_sqlite(&producer).unwrap();
    })
    .await;
}

#[tokio::test]
async fn postgres_outbox_lag_is_the_oldest_waiting_row() {
    let Some((url, _db)) =
        hookd_store::testing::fresh_postgres("gauges::postgres_outbox_lag").await
    else {
        return;
    };
    let store = hookd_store::postgres::PgStore::connect(&url).await.unwrap();
    outbox_lag_is_the_oldest_waiting_row(&store, async || {
        let producer = sqlx::postgres::PgPoolOptions::new()
            .connect(&url)
            .await
            .unwrap();
        event().insert(&producer).await.unwrap();
    })
    .await;
}
