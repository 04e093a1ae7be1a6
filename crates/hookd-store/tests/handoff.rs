//! New deliveries handed to a claimer as they are written ([`Handoff`]), on SQLite: what it
//! takes is stored claimed and given over once committed, what it refuses waits in the queue,
//! and a write that fails hands nothing over and holds nothing; a record that settles the
//! head of an ordering key hands off the key's next. (On PostgreSQL, where the room
//! is the cluster's, `postgres_publish` covers the handoff.)

mod harness;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Waker};
use std::time::Duration;

use harness::fixtures::{at, message};
use harness::queue::{LEASE_MS, app_with_endpoints, claim, delivery, pair, pairs};
use hookd_core::EndpointId;
use hookd_core::model::{Application, DeliveryStatus, Endpoint};
use hookd_store::prelude::*;
use hookd_store::sqlite::SqliteStore;
use hookd_store::{ClaimedDelivery, Handoff, HandoffMode, NewMessage, Reserved, Route, StoreError};
use tempfile::TempDir;

/// Takes the deliveries to some endpoints, keeping what it is given, and counts the room it
/// held and what came back unused.
struct Taker {
    endpoints: Vec<EndpointId>,
    reserved: AtomicUsize,
    started: Arc<Mutex<Vec<ClaimedDelivery>>>,
    given_back: Arc<AtomicUsize>,
}

/// Counts a reservation dropped without its delivery.
struct Room(Arc<AtomicUsize>);

impl Drop for Room {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Handoff for Taker {
    fn reserve(&self, endpoint: &EndpointId) -> Option<Reserved> {
        if !self.endpoints.contains(endpoint) {
            return None;
        }
        self.reserved.fetch_add(1, Ordering::SeqCst);
        let (started, room) = (self.started.clone(), Room(self.given_back.clone()));
        Some(Reserved::new(at(20 + LEASE_MS), move |claimed| {
            std::mem::forget(room);
            started.lock().unwrap().push(claimed);
        }))
    }

    fn per_endpoint(&self) -> usize {
        usize::MAX
    }
}

#[tokio::test]
async fn taken_deliveries_are_written_claimed_and_the_rest_wait_for_a_claim() {
    let (store, _dir) = harness::sqlite().await;
    let (a, eps) = app_with_endpoints(&store, 2).await;
    let taker = Taker::on(&store, std::slice::from_ref(&eps[0].id));
    let msg = message(&a, "order.shipped", None, None, 20);

    let created = store.publish(NewMessage::new(msg.clone())).await.unwrap();

    assert_eq!((created.deliveries, created.queued), (2, 1));
    let taken = delivery(&store, &msg, &eps[0]).await.unwrap();
    assert_eq!(
        (taken.status, taken.next_attempt_at, taken.attempt_count),
        (DeliveryStatus::Sending, Some(at(20 + LEASE_MS)), 0)
    );
    let started = taker.started();
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].delivery, taken);
    assert_eq!(started[0].message, msg);
    assert_eq!(started[0].endpoint, eps[0]);
    assert!(!started[0].manual);
    // A claim finds only the delivery the taker refused.
    let claimed = claim(&store, 30, 10, 10).await;
    assert_eq!(pairs(&claimed), [pair(&msg, &eps[1])].into());
}

#[tokio::test]
async fn every_reservation_is_handed_over_once_or_given_back() {
    let (store, _dir) = harness::sqlite().await;
    let (a, eps) = app_with_endpoints(&store, 1).await;
    // No such endpoint: a delivery to it is refused after its room is reserved.
    let ghost = EndpointId::from_stored("ep_ghost".into());
    let taker = Taker::on(&store, &[eps[0].id.clone(), ghost.clone()]);
    // Concurrent publishes share the writer's batches; a refused one makes its batch run
    // again, reserving once more for the others.
    let publishes = (0..40).map(|i| {
        let (store, msg) = (
            store.clone(),
            message(&a, "order.shipped", None, None, 20 + i),
        );
        let route = match i % 2 {
            0 => Route::Subscribers,
            _ => Route::Only(ghost.clone()),
        };
        tokio::spawn(async move {
            store
                .publish(NewMessage::new(msg.clone()).routed(route.clone()))
                .await
        })
    });
    let mut refused = 0;
    for publish in publishes.collect::<Vec<_>>() {
        match publish.await.unwrap() {
            Ok(created) => assert_eq!((created.deliveries, created.queued), (1, 0)),
            Err(StoreError::NotFound("endpoint")) => refused += 1,
            Err(other) => panic!("{other}"),
        }
    }

    assert_eq!(refused, 20);
    let started = taker.started();
    let messages: BTreeSet<_> = started.iter().map(|c| c.message.id.clone()).collect();
    assert_eq!(
        (started.len(), messages.len()),
        (20, 20),
        "each written delivery handed off once"
    );
    let (reserved, given_back) = (taker.reserved.load(Ordering::SeqCst), taker.given_back());
    assert_eq!(
        reserved,
        started.len() + given_back,
        "every reservation is handed off or given back"
    );
    assert!(
        given_back >= 20,
        "the refused ones' rooms came back: {given_back}"
    );
}

#[tokio::test]
async fn a_test_send_to_a_disabled_endpoint_waits_for_it() {
    let (store, _dir, a, eps, taker) = one_endpoint_taken().await;
    store
        .disable_endpoint(&eps[0].id, "gone", at(15), &[])
        .await
        .unwrap();
    let msg = message(&a, "order.shipped", None, None, 20);

    let created = store
        .publish(NewMessage::new(msg.clone()).routed(Route::Only(eps[0].id.clone())))
        .await
        .unwrap();

    assert_eq!((created.deliveries, created.queued), (1, 1));
    let waiting = delivery(&store, &msg, &eps[0]).await.unwrap();
    assert_eq!(waiting.status, DeliveryStatus::Pending);
    assert!(taker.started().is_empty());
    assert_eq!(taker.given_back(), 1, "its room came back");
}

#[tokio::test]
async fn a_publish_whose_caller_goes_away_still_hands_its_deliveries_over() {
    let (store, _dir, a, _, taker) = one_endpoint_taken().await;
    let msg = message(&a, "order.shipped", None, None, 20);

    // Polled once, then dropped: the request was cancelled while its write was queued.
    {
        let mut publish = std::pin::pin!(store.publish(NewMessage::new(msg.clone())));
        let first = publish
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert!(first.is_pending(), "the write had not finished");
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while taker.started().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "never handed off");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = taker.started();
    assert_eq!(started[0].message.id, msg.id);
    assert_eq!(taker.given_back(), 0);
}

#[tokio::test]
async fn a_claimer_gone_takes_nothing() {
    let (store, _dir, a, eps, taker) = one_endpoint_taken().await;
    drop(taker);
    let msg = message(&a, "order.shipped", None, None, 20);

    let created = store.publish(NewMessage::new(msg.clone())).await.unwrap();

    assert_eq!((created.deliveries, created.queued), (1, 1));
    let waiting = delivery(&store, &msg, &eps[0]).await.unwrap();
    assert_eq!(waiting.status, DeliveryStatus::Pending);
}

#[tokio::test]
async fn recording_a_keys_head_hands_over_the_next_of_its_key() {
    let (store, _dir, a, eps, taker) = one_endpoint_taken().await;
    let keyed = |created| {
        let mut msg = message(&a, "order.shipped", None, None, created);
        msg.ordering_key = Some("C-4471".into());
        msg
    };
    let (head, next) = (keyed(20), keyed(21));
    for msg in [&head, &next] {
        store.publish(NewMessage::new(msg.clone())).await.unwrap();
    }
    assert_eq!(taker.started().len(), 1, "the head only; the next waits");
    let claimed = taker.started().remove(0);
    let settled = hookd_core::model::Delivery {
        status: DeliveryStatus::Success,
        attempt_count: 1,
        next_attempt_at: None,
        updated_at: at(30),
        ..claimed.delivery.clone()
    };
    let attempt = harness::queue::attempt(&head, &eps[0], 30, DeliveryStatus::Success);
    let record = hookd_store::AttemptRecord {
        attempt,
        next: settled,
        lease: claimed.delivery.next_attempt_at,
        hold_until: None,
        events: Vec::new(),
    };

    store.record_attempts(&[record]).await.unwrap();

    let started = taker.started();
    assert_eq!(started.len(), 2, "the next handed off without a claim");
    assert_eq!(started[1].message, next);
    let taken = delivery(&store, &next, &eps[0]).await.unwrap();
    assert_eq!(
        (taken.status, taken.next_attempt_at),
        (DeliveryStatus::Sending, Some(at(20 + LEASE_MS)))
    );
    assert!(claim(&store, 40, 10, 10).await.is_empty());
}

impl Taker {
    /// A taker of the deliveries to `endpoints`, handed them by `store`.
    fn on(store: &dyn Store, endpoints: &[EndpointId]) -> Arc<Self> {
        let taker = Arc::new(Self {
            endpoints: endpoints.to_vec(),
            reserved: AtomicUsize::new(0),
            started: Arc::default(),
            given_back: Arc::default(),
        });
        let weak: Weak<dyn Handoff> = Arc::downgrade(&taker) as Weak<Self>;
        assert_eq!(store.hand_off_new_deliveries(weak), HandoffMode::Sole);
        taker
    }

    fn started(&self) -> Vec<ClaimedDelivery> {
        self.started.lock().unwrap().clone()
    }

    fn given_back(&self) -> usize {
        self.given_back.load(Ordering::SeqCst)
    }
}

/// A store with an application and one endpoint, whose deliveries a [`Taker`] takes.
async fn one_endpoint_taken() -> (SqliteStore, TempDir, Application, Vec<Endpoint>, Arc<Taker>) {
    let (store, dir) = harness::sqlite().await;
    let (app, endpoints) = app_with_endpoints(&store, 1).await;
    let taker = Taker::on(&store, std::slice::from_ref(&endpoints[0].id));
    (store, dir, app, endpoints, taker)
}
