//! The `DeliveryQueue` contract, on every `Store` implementation: claiming due deliveries
//! within limits and leases, resending and recovering.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use std::collections::BTreeSet;

use harness::fixtures::{app, at, endpoint, message};
use harness::queue::{
    LEASE_MS, app_with_endpoints, claim, delivery, pair, pairs, publish, record, request,
};
use hookd_core::model::{Delivery, DeliveryStatus, Message};
use hookd_core::{AppId, EndpointId, MessageId};
use hookd_store::{ApiToken, NewMessage, Store, StoreError};

async fn a_claim_takes_the_oldest_due_within_its_limits(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 3).await;
    let mut msgs = Vec::new();
    for i in 1..=6 {
        msgs.push(publish(store, &a, i * 10).await);
    }
    // Due at 35: messages 0, 1 and 2 to each endpoint; two per endpoint, the oldest.
    let first = claim(store, 35, 100, 2).await;
    let expected: BTreeSet<_> = eps
        .iter()
        .flat_map(|e| [pair(&msgs[0], e), pair(&msgs[1], e)])
        .collect();
    assert_eq!(pairs(&first), expected);
    for claimed in &first {
        assert_eq!(claimed.delivery.status, DeliveryStatus::Sending);
        assert_eq!(claimed.delivery.next_attempt_at, Some(at(35 + LEASE_MS)));
        assert_eq!(claimed.delivery.updated_at, at(35));
        assert_eq!(claimed.delivery.attempt_count, 0);
        assert!(!claimed.manual);
        let msg = msgs.iter().find(|m| m.id == claimed.delivery.message_id);
        assert_eq!(Some(&claimed.message), msg);
        let ep = eps.iter().find(|e| e.id == claimed.delivery.endpoint_id);
        assert_eq!(Some(&claimed.endpoint), ep);
    }
    let stored = delivery(store, &msgs[0], &eps[0]).await.unwrap();
    assert_eq!(stored.status, DeliveryStatus::Sending);
    // The rest of what is due; then nothing.
    let second = claim(store, 35, 100, 2).await;
    let expected: BTreeSet<_> = eps.iter().map(|e| pair(&msgs[2], e)).collect();
    assert_eq!(pairs(&second), expected);
    assert!(claim(store, 35, 100, 2).await.is_empty());
    // `limit` caps the whole claim, oldest due first: message 3 everywhere, then one of 4.
    let limited = claim(store, 100, 4, 10).await;
    assert_eq!(limited.len(), 4);
    let of = |m: &Message| limited.iter().filter(|c| c.message.id == m.id).count();
    assert_eq!((of(&msgs[3]), of(&msgs[4]), of(&msgs[5])), (3, 1, 0));
    // Nothing due yet is claimed: message 5 (60) is due later than 55.
    let early = claim(store, 55, 100, 10).await;
    assert!(
        early.iter().all(|c| c.message.id == msgs[4].id),
        "{early:?}"
    );
    assert_eq!(early.len(), 2);
    assert!(claim(store, 55, 100, 10).await.is_empty());
}

async fn disabled_and_skipped_endpoints_are_not_claimed(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 3).await;
    let msg = publish(store, &a, 10).await;
    store
        .disable_endpoint(&eps[2].id, "gone", at(15), &[])
        .await
        .unwrap();
    let skipping = store
        .claim_due(&request(20, 10, 10, &[&eps[1]]))
        .await
        .unwrap();
    assert_eq!(pairs(&skipping), BTreeSet::from([pair(&msg, &eps[0])]));
    let rest = claim(store, 20, 10, 10).await;
    assert_eq!(pairs(&rest), BTreeSet::from([pair(&msg, &eps[1])]));
    assert!(claim(store, 20, 10, 10).await.is_empty());
    // The disabled endpoint's delivery waited, pending, and is claimed once it is enabled.
    let waiting = delivery(store, &msg, &eps[2]).await.unwrap();
    assert_eq!(waiting.status, DeliveryStatus::Pending);
    let mut enabled = store
        .get_endpoint(&a.id, eps[2].id.as_str())
        .await
        .unwrap()
        .unwrap();
    enabled.disabled = false;
    enabled.disabled_reason = None;
    enabled.disabled_at = None;
    store.update_endpoint(&enabled).await.unwrap();
    let after = claim(store, 20, 10, 10).await;
    assert_eq!(pairs(&after), BTreeSet::from([pair(&msg, &eps[2])]));
}

async fn a_claim_is_leased_until_its_lease_ends(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let msg = publish(store, &a, 10).await;
    assert_eq!(claim(store, 20, 10, 10).await.len(), 1);
    // Still leased just before the lease ends, for any claimer.
    assert!(claim(store, 20 + LEASE_MS - 1, 10, 10).await.is_empty());
    // A claimer that died lets the lease run out: the delivery is due again.
    let again = claim(store, 20 + LEASE_MS, 10, 10).await;
    assert_eq!(pairs(&again), BTreeSet::from([pair(&msg, &eps[0])]));
    assert_eq!(again[0].delivery.attempt_count, 0);
    assert_eq!(
        again[0].delivery.next_attempt_at,
        Some(at(20 + 2 * LEASE_MS))
    );
}

async fn empty_limits_claim_nothing(store: &dyn Store) {
    let (a, _) = app_with_endpoints(store, 1).await;
    publish(store, &a, 10).await;
    assert!(claim(store, 20, 0, 10).await.is_empty());
    assert!(claim(store, 20, 10, 0).await.is_empty());
    assert_eq!(claim(store, 20, 10, 10).await.len(), 1);
}

async fn resend_queues_one_manual_attempt_unless_one_is_in_flight(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let shipped = endpoint(&a, Some("shipped"), Some(&["order.shipped"]), None);
    let paid = endpoint(&a, Some("paid"), Some(&["order.paid"]), None);
    for ep in [&shipped, &paid] {
        store.create_endpoint(ep).await.unwrap();
    }
    let msg = publish(store, &a, 10).await;
    assert!(delivery(store, &msg, &paid).await.is_none());
    // A message never routed to an endpoint gets a delivery there, due at once, manual.
    assert!(store.resend(&msg.id, &paid.id, at(50)).await.unwrap());
    let created = delivery(store, &msg, &paid).await.unwrap();
    assert_eq!(
        (
            created.status,
            created.attempt_count,
            created.next_attempt_at
        ),
        (DeliveryStatus::Pending, 0, Some(at(50)))
    );
    let claimed = claim(store, 50, 10, 10).await;
    let manual: BTreeSet<_> = claimed
        .iter()
        .map(|c| (c.endpoint.id.clone(), c.manual))
        .collect();
    assert_eq!(
        manual,
        BTreeSet::from([(shipped.id.clone(), false), (paid.id.clone(), true)])
    );
    // In flight: left alone.
    assert!(!store.resend(&msg.id, &shipped.id, at(60)).await.unwrap());
    let sending = delivery(store, &msg, &shipped).await.unwrap();
    assert_eq!(
        (sending.status, sending.next_attempt_at),
        (DeliveryStatus::Sending, Some(at(50 + LEASE_MS)))
    );
    // Failed for good, then resent: pending again with its attempt count kept, manual.
    record(store, &msg, &shipped, 70, DeliveryStatus::Fail, 1, None)
        .await
        .unwrap();
    assert!(store.resend(&msg.id, &shipped.id, at(80)).await.unwrap());
    let requeued = delivery(store, &msg, &shipped).await.unwrap();
    assert_eq!(
        (
            requeued.status,
            requeued.attempt_count,
            requeued.next_attempt_at
        ),
        (DeliveryStatus::Pending, 1, Some(at(80)))
    );
    let again = claim(store, 80, 10, 10).await;
    assert_eq!(pairs(&again), BTreeSet::from([pair(&msg, &shipped)]));
    assert!(again[0].manual);
    // Recording the attempt clears the manual flag.
    record(
        store,
        &msg,
        &shipped,
        90,
        DeliveryStatus::Pending,
        2,
        Some(100),
    )
    .await
    .unwrap();
    let scheduled = claim(store, 100, 10, 10).await;
    assert_eq!(scheduled.len(), 1);
    assert!(!scheduled[0].manual);
    // Unknown message or endpoint.
    let unknown_message = store
        .resend(&MessageId::new(at(0)), &shipped.id, at(100))
        .await;
    assert!(
        matches!(unknown_message, Err(StoreError::NotFound("message"))),
        "{unknown_message:?}"
    );
    let unknown_endpoint = store
        .resend(&msg.id, &EndpointId::new(at(0)), at(100))
        .await;
    assert!(
        matches!(unknown_endpoint, Err(StoreError::NotFound("endpoint"))),
        "{unknown_endpoint:?}"
    );
}

async fn recover_requeues_failed_deliveries_of_messages_in_the_window(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 2).await;
    let (ep, other) = (&eps[0], &eps[1]);
    let mut msgs = Vec::new();
    for created in [100, 200, 300, 400] {
        msgs.push(publish(store, &a, created).await);
    }
    for m in &msgs[..3] {
        record(store, m, ep, 500, DeliveryStatus::Fail, 10, None)
            .await
            .unwrap();
    }
    record(store, &msgs[3], ep, 500, DeliveryStatus::Success, 1, None)
        .await
        .unwrap();
    record(store, &msgs[1], other, 500, DeliveryStatus::Fail, 10, None)
        .await
        .unwrap();
    // Messages created in [200, 400): the second and third.
    let recovered = store
        .recover(&ep.id, at(200), Some(at(400)), at(1_000))
        .await
        .unwrap();
    assert_eq!(recovered, 2);
    for m in &msgs[1..3] {
        let d = delivery(store, m, ep).await.unwrap();
        assert_eq!(
            (d.status, d.attempt_count, d.next_attempt_at, d.updated_at),
            (DeliveryStatus::Pending, 0, Some(at(1_000)), at(1_000))
        );
    }
    let status = |d: Option<Delivery>| d.unwrap().status;
    assert_eq!(
        status(delivery(store, &msgs[0], ep).await),
        DeliveryStatus::Fail
    );
    assert_eq!(
        status(delivery(store, &msgs[3], ep).await),
        DeliveryStatus::Success
    );
    assert_eq!(
        status(delivery(store, &msgs[1], other).await),
        DeliveryStatus::Fail
    );
    // Recovered deliveries are scheduled ones, not manual.
    let claimed = store
        .claim_due(&request(1_000, 10, 10, &[other]))
        .await
        .unwrap();
    assert_eq!(
        pairs(&claimed),
        BTreeSet::from([pair(&msgs[1], ep), pair(&msgs[2], ep)])
    );
    assert!(claimed.iter().all(|c| !c.manual));
    // Open-ended: everything failed since the start; sending ones are not failed.
    assert_eq!(
        store.recover(&ep.id, at(0), None, at(2_000)).await.unwrap(),
        1
    );
    assert_eq!(
        status(delivery(store, &msgs[0], ep).await),
        DeliveryStatus::Pending
    );
    assert_eq!(
        store.recover(&ep.id, at(0), None, at(2_000)).await.unwrap(),
        0
    );
}

async fn recover_leaves_messages_whose_payload_was_expunged(store: &dyn Store) {
    let (a, eps) = app_with_endpoints(store, 1).await;
    let ep = &eps[0];
    let (kept, expunged) = (publish(store, &a, 100).await, publish(store, &a, 200).await);
    for m in [&kept, &expunged] {
        record(store, m, ep, 500, DeliveryStatus::Fail, 10, None)
            .await
            .unwrap();
    }
    store.expunge_message_content(&expunged).await.unwrap();
    assert_eq!(
        store.recover(&ep.id, at(0), None, at(1_000)).await.unwrap(),
        1
    );
    let status = |d: Option<Delivery>| d.unwrap().status;
    assert_eq!(
        status(delivery(store, &kept, ep).await),
        DeliveryStatus::Pending
    );
    assert_eq!(
        status(delivery(store, &expunged, ep).await),
        DeliveryStatus::Fail
    );
}

async fn a_missing_parent_is_not_found(store: &dyn Store) {
    let ghost = app(None, 0);
    let on_ghost = store
        .create_endpoint(&endpoint(&ghost, None, None, None))
        .await;
    assert!(
        matches!(on_ghost, Err(StoreError::NotFound("application"))),
        "{on_ghost:?}"
    );
    let published = store
        .publish(NewMessage::new(message(
            &ghost,
            "order.shipped",
            None,
            None,
            10,
        )))
        .await;
    assert!(
        matches!(published, Err(StoreError::NotFound("application"))),
        "{published:?}"
    );
    let token = ApiToken {
        id: "tok_ghost".into(),
        token_hash: "ef".repeat(32),
        app_id: Some(AppId::new(at(0))),
        created_at: at(0),
        ..ApiToken::default()
    };
    let created = store.create_token(&token).await;
    assert!(
        matches!(created, Err(StoreError::NotFound("application"))),
        "{created:?}"
    );
}

async fn a_scheduled_message_is_claimed_only_once_due(store: &dyn Store) {
    let (a, eps) = harness::queue::app_with_endpoints(store, 2).await;
    let msg = message(&a, "order.shipped", None, None, 100);
    let created = store
        .publish(
            NewMessage::new(Message {
                deliver_at: Some(at(5_000)),
                ..msg.clone()
            })
            .expiring(Some(at(9_000_000))),
        )
        .await
        .unwrap();
    assert_eq!(
        (created.deliveries, created.queued),
        (2, 2),
        "all wait, none handed off"
    );
    let stored = store.get_message(&a.id, msg.id.as_str()).await.unwrap();
    assert_eq!(stored.and_then(|m| m.deliver_at), Some(at(5_000)));
    assert!(
        claim(store, 4_999, 10, 10).await.is_empty(),
        "not before its time"
    );
    for ep in &eps {
        let waiting = harness::queue::delivery(store, &msg, ep).await.unwrap();
        assert_eq!(waiting.status, DeliveryStatus::Pending);
        assert_eq!(waiting.next_attempt_at, Some(at(5_000)));
    }
    assert_eq!(claim(store, 5_000, 10, 10).await.len(), 2, "then both");
}

behaviour!(
    a_claim_takes_the_oldest_due_within_its_limits,
    disabled_and_skipped_endpoints_are_not_claimed,
    a_claim_is_leased_until_its_lease_ends,
    empty_limits_claim_nothing,
    resend_queues_one_manual_attempt_unless_one_is_in_flight,
    recover_requeues_failed_deliveries_of_messages_in_the_window,
    recover_leaves_messages_whose_payload_was_expunged,
    a_missing_parent_is_not_found,
    a_scheduled_message_is_claimed_only_once_due,
);
