//! Ordered delivery in the store, on every `Store` implementation: of an endpoint's
//! deliveries that share an ordering key only the oldest unsettled one is ever claimable, the
//! next becomes due when it settles (succeeds, fails for good, is skipped), resend, recover
//! and many concurrent publishes keep that, and deleting an endpoint or application with
//! waiting deliveries (the triggers run on every deleted row) deletes them cleanly.

mod harness;

use std::collections::BTreeSet;

use harness::fixtures::{app, at, endpoint, message};
use harness::queue::{claim, delivery, record};
use hookd_core::MessageId;
use hookd_core::model::{Application, DeliveryStatus, Endpoint, Message, Ordering};
use hookd_store::{NewMessage, Skipped, Store, StoreError};

/// An application with one endpoint (no rate limit) of `ordering`.
async fn one_endpoint(store: &dyn Store, ordering: Ordering) -> (Application, Endpoint) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let mut ep = endpoint(&a, None, None, None);
    ep.throttle_rate = None;
    ep.ordering = ordering;
    store.create_endpoint(&ep).await.unwrap();
    (a, ep)
}

/// Publishes a message created at `created` with ordering key `key`.
async fn publish(store: &dyn Store, a: &Application, created: i64, key: Option<&str>) -> Message {
    let mut msg = message(a, "order.shipped", None, None, created);
    msg.ordering_key = key.map(str::to_owned);
    store.publish(NewMessage::new(msg.clone())).await.unwrap();
    msg
}

/// The messages a claim at `now` takes.
async fn claimed(store: &dyn Store, now: i64) -> BTreeSet<MessageId> {
    claim(store, now, 100, 100)
        .await
        .into_iter()
        .map(|c| c.message.id)
        .collect()
}

fn ids(messages: &[&Message]) -> BTreeSet<MessageId> {
    messages.iter().map(|m| m.id.clone()).collect()
}

async fn a_key_is_delivered_one_message_at_a_time_in_order(store: &dyn Store) {
    let (a, ep) = one_endpoint(store, Ordering::PerKey).await;
    let a1 = publish(store, &a, 10, Some("C-4471")).await;
    let a2 = publish(store, &a, 20, Some("C-4471")).await;
    let a3 = publish(store, &a, 30, Some("C-4471")).await;
    let b1 = publish(store, &a, 40, Some("C-9")).await;
    let free = publish(store, &a, 50, None).await;
    // Each key's oldest and the unordered message; the rest of the key waits.
    assert_eq!(claimed(store, 100).await, ids(&[&a1, &b1, &free]));
    let waiting = delivery(store, &a2, &ep).await.unwrap();
    assert!(waiting.is_waiting(), "{waiting:?}");
    assert_eq!(waiting.ordering_key.as_deref(), Some("C-4471"));
    let heads = store
        .heads_of(&[(ep.id.clone(), "C-4471".into())])
        .await
        .unwrap();
    assert_eq!(heads.get(&(ep.id.clone(), "C-4471".into())), Some(&a1.id));
    // A failed attempt with a retry keeps its key's place: nothing behind it goes.
    record(
        store,
        &a1,
        &ep,
        110,
        DeliveryStatus::Pending,
        1,
        Some(1_000),
    )
    .await
    .unwrap();
    assert!(claimed(store, 500).await.is_empty());
    assert_eq!(claimed(store, 1_000).await, ids(&[&a1]));
    // Settled, the next of the key is due at once.
    record(store, &a1, &ep, 1_010, DeliveryStatus::Success, 2, None)
        .await
        .unwrap();
    assert_eq!(claimed(store, 1_010).await, ids(&[&a2]));
    // Failed for good settles it too.
    record(store, &a2, &ep, 1_020, DeliveryStatus::Fail, 1, None)
        .await
        .unwrap();
    assert_eq!(claimed(store, 1_020).await, ids(&[&a3]));
}

async fn a_strict_endpoint_receives_every_message_one_at_a_time(store: &dyn Store) {
    let (a, ep) = one_endpoint(store, Ordering::Strict).await;
    let first = publish(store, &a, 10, None).await;
    let second = publish(store, &a, 20, Some("C-1")).await;
    let third = publish(store, &a, 30, None).await;
    assert_eq!(claimed(store, 100).await, ids(&[&first]));
    for (done, next, t) in [(&first, &second, 110), (&second, &third, 120)] {
        record(store, done, &ep, t, DeliveryStatus::Success, 1, None)
            .await
            .unwrap();
        assert_eq!(claimed(store, t).await, ids(&[next]));
    }
    assert_eq!(
        delivery(store, &third, &ep).await.unwrap().ordering_key,
        Some(String::new())
    );
}

async fn skipping_the_head_lets_the_next_go(store: &dyn Store) {
    let (a, ep) = one_endpoint(store, Ordering::PerKey).await;
    let head = publish(store, &a, 10, Some("k")).await;
    let next = publish(store, &a, 20, Some("k")).await;
    assert_eq!(
        store.skip(&next.id, &ep.id, at(30)).await.unwrap(),
        Skipped::Skipped,
        "a waiting delivery can be given up on too"
    );
    let behind = publish(store, &a, 40, Some("k")).await;
    assert_eq!(claimed(store, 50).await, ids(&[&head]));
    assert_eq!(
        store.skip(&head.id, &ep.id, at(60)).await.unwrap(),
        Skipped::InFlight
    );
    record(
        store,
        &head,
        &ep,
        70,
        DeliveryStatus::Pending,
        1,
        Some(10_000),
    )
    .await
    .unwrap();
    assert_eq!(
        store.skip(&head.id, &ep.id, at(80)).await.unwrap(),
        Skipped::Skipped
    );
    let skipped = delivery(store, &head, &ep).await.unwrap();
    assert_eq!(
        (skipped.status, skipped.next_attempt_at),
        (DeliveryStatus::Fail, None)
    );
    assert_eq!(claimed(store, 80).await, ids(&[&behind]));
    assert_eq!(
        store.skip(&head.id, &ep.id, at(90)).await.unwrap(),
        Skipped::Settled
    );
    let other = one_endpoint(store, Ordering::PerKey).await.1;
    assert!(matches!(
        store.skip(&head.id, &other.id, at(90)).await,
        Err(StoreError::NotFound(_))
    ));
}

async fn resend_and_recover_take_their_turn_in_the_key(store: &dyn Store) {
    let (a, ep) = one_endpoint(store, Ordering::PerKey).await;
    let old = publish(store, &a, 10, Some("k")).await;
    assert_eq!(claimed(store, 10).await, ids(&[&old]));
    record(store, &old, &ep, 20, DeliveryStatus::Fail, 1, None)
        .await
        .unwrap();
    let newer = publish(store, &a, 30, Some("k")).await;
    assert_eq!(claimed(store, 30).await, ids(&[&newer]));
    // Resent while the key's head is in flight: it waits, and goes next.
    assert!(store.resend(&old.id, &ep.id, at(40)).await.unwrap());
    assert!(delivery(store, &old, &ep).await.unwrap().is_waiting());
    let last = publish(store, &a, 50, Some("k")).await;
    record(store, &newer, &ep, 60, DeliveryStatus::Fail, 1, None)
        .await
        .unwrap();
    assert_eq!(claimed(store, 60).await, ids(&[&old]));
    record(store, &old, &ep, 70, DeliveryStatus::Fail, 2, None)
        .await
        .unwrap();
    assert_eq!(claimed(store, 70).await, ids(&[&last]));
    record(store, &last, &ep, 80, DeliveryStatus::Success, 1, None)
        .await
        .unwrap();
    // Recover: the two failed ones come back one at a time, oldest first.
    assert_eq!(store.recover(&ep.id, at(0), None, at(90)).await.unwrap(), 2);
    assert_eq!(claimed(store, 90).await, ids(&[&old]));
    record(store, &old, &ep, 100, DeliveryStatus::Success, 1, None)
        .await
        .unwrap();
    assert_eq!(claimed(store, 100).await, ids(&[&newer]));
}

async fn deleting_an_endpoint_or_application_with_waiting_deliveries_deletes_them(
    store: &dyn Store,
) {
    let (a, ep) = one_endpoint(store, Ordering::PerKey).await;
    let strict = {
        let mut ep = endpoint(&a, Some("strict"), None, None);
        ep.throttle_rate = None;
        ep.ordering = Ordering::Strict;
        store.create_endpoint(&ep).await.unwrap();
        ep
    };
    for created in 10..15 {
        publish(store, &a, created, Some("k")).await;
    }
    store.delete_endpoint(&strict).await.unwrap();
    let kept = publish(store, &a, 20, Some("other")).await;
    assert!(
        claimed(store, 30).await.contains(&kept.id),
        "the other endpoint goes on"
    );
    store.delete_endpoint(&ep).await.unwrap();
    store.delete_app(&a.id).await.unwrap();
    assert!(claimed(store, 40).await.is_empty());
}

async fn concurrent_publishes_of_one_key_queue_exactly_one(store: &dyn Store) {
    let (a, ep) = one_endpoint(store, Ordering::PerKey).await;
    let publishes = (0..40).map(|i| {
        let mut msg = message(&a, "order.shipped", None, None, 100 + i);
        msg.ordering_key = Some("hot".into());
        async move {
            store.publish(NewMessage::new(msg.clone())).await.unwrap();
            msg
        }
    });
    let mut messages = futures::future::join_all(publishes).await;
    messages.sort_by(|x, y| x.id.cmp(&y.id));
    let mut sent = Vec::new();
    for t in 0..40 {
        let now = 1_000 + t * 10;
        let batch = claim(store, now, 100, 100).await;
        assert_eq!(batch.len(), 1, "one at a time");
        let msg = messages
            .iter()
            .find(|m| m.id == batch[0].message.id)
            .unwrap();
        record(store, msg, &ep, now, DeliveryStatus::Success, 1, None)
            .await
            .unwrap();
        sent.push(msg.id.clone());
    }
    assert_eq!(sent.len(), 40);
    assert_eq!(
        sent.iter().collect::<BTreeSet<_>>().len(),
        40,
        "each exactly once"
    );
}

behaviour!(
    a_key_is_delivered_one_message_at_a_time_in_order,
    a_strict_endpoint_receives_every_message_one_at_a_time,
    skipping_the_head_lets_the_next_go,
    resend_and_recover_take_their_turn_in_the_key,
    concurrent_publishes_of_one_key_queue_exactly_one,
    deleting_an_endpoint_or_application_with_waiting_deliveries_deletes_them,
);
