//! Publishing under concurrency: every publish lands, each routed by its own filters and answered as it would be alone; idempotent responses.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use std::collections::HashSet;
use std::sync::Arc;

use harness::checks::{assert_stored, pending_routes};
use harness::fixtures::{app, at, endpoint, first_page, message};
use hookd_core::EndpointId;
use hookd_core::model::{Application, Endpoint, Message};
use hookd_store::{
    Handoff, MessageFilter, NewMessage, Reserved, Route, Store, StoreError, StoredResponse,
};

async fn concurrent_publishes_all_land(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    store
        .create_endpoint(&endpoint(&a, None, None, None))
        .await
        .unwrap();
    let publishes = (0..200).map(|i| {
        let msg = message(
            &a,
            "order.shipped",
            Some(&format!("evt-{}", i % 150)),
            None,
            i,
        );
        async move { store.publish(NewMessage::new(msg.clone())).await }
    });
    let outcomes = futures::future::join_all(publishes).await;
    let accepted = outcomes.iter().filter(|o| o.is_ok()).count();
    let conflicts = outcomes
        .iter()
        .filter(|o| matches!(o, Err(StoreError::Conflict(_))))
        .count();
    assert_eq!((accepted, conflicts), (150, 50));
    let listed = store
        .list_messages(&a.id, &MessageFilter::default(), &first_page(500))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 150);
}

async fn a_test_send_goes_to_its_endpoint_alone(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let target = endpoint(&a, Some("target"), Some(&["order.paid"]), None);
    let other = endpoint(&a, Some("other"), None, None);
    store.create_endpoint(&target).await.unwrap();
    store.create_endpoint(&other).await.unwrap();
    let msg = message(&a, "order.shipped", None, None, 10);
    let created = store
        .publish(NewMessage::new(msg.clone()).routed(Route::Only(target.id.clone())))
        .await
        .unwrap();
    assert_eq!(created.deliveries, 1);
    let routed = store.list_message_deliveries(&a.id, &msg).await.unwrap();
    assert_eq!(routed.len(), 1);
    assert_eq!(
        routed[0].0.id, target.id,
        "the endpoint's filters do not apply to a test send"
    );

    let ghost = hookd_core::EndpointId::new(at(0));
    let orphan = message(&a, "order.shipped", None, None, 11);
    let outcome = store
        .publish(NewMessage::new(orphan.clone()).routed(Route::Only(ghost)))
        .await;
    assert!(
        matches!(outcome, Err(StoreError::NotFound("endpoint"))),
        "{outcome:?}"
    );
    assert_eq!(
        store.get_message(&a.id, orphan.id.as_str()).await.unwrap(),
        None,
        "nothing is written"
    );
}

/// A message to publish and where it goes.
type Publish = (Message, Route);

/// What became of a publish: `Ok(deliveries)` or the error's text.
type Verdict = Result<usize, String>;

/// Publishes every `(message, route)` at once, as concurrent API requests do (on PostgreSQL
/// they meet in one publish batch), and answers each one's verdict.
async fn publish_at_once(store: &dyn Store, publishes: &[Publish]) -> Vec<Verdict> {
    let outcomes = futures::future::join_all(publishes.iter().map(|(message, route)| {
        store.publish(NewMessage::new(message.clone()).routed(route.clone()))
    }))
    .await;
    outcomes
        .into_iter()
        .zip(publishes)
        .map(|(outcome, (message, _))| match outcome {
            Ok(created) => {
                assert_eq!(&created.message, message);
                Ok(created.deliveries)
            }
            Err(StoreError::Conflict(text)) => Err(format!("conflict: {text}")),
            Err(StoreError::NotFound(what)) => Err(format!("{what} not found")),
            Err(other) => Err(format!("{other:?}")),
        })
        .collect()
}

async fn concurrent_publishes_are_routed_each_by_its_own_filters(store: &dyn Store) {
    let apps: Vec<Application> = (0..4).map(|i| app(None, i)).collect();
    for a in &apps {
        store.create_app(a).await.unwrap();
    }
    let mut off = endpoint(&apps[0], Some("off"), None, None);
    off.disabled = true;
    // The fourth application has no endpoint.
    let endpoints = [
        endpoint(&apps[0], Some("all"), None, None),
        endpoint(&apps[0], Some("paid"), Some(&["order.paid"]), None),
        endpoint(&apps[0], Some("eu"), None, Some(&["eu"])),
        off,
        endpoint(&apps[1], Some("paid"), Some(&["order.paid"]), None),
        endpoint(
            &apps[1],
            Some("paid-eu"),
            Some(&["order.paid"]),
            Some(&["eu"]),
        ),
        endpoint(&apps[2], Some("all"), None, None),
    ];
    for ep in &endpoints {
        store.create_endpoint(ep).await.unwrap();
    }
    publish_and_check_routes(store, &apps, &endpoints, 0).await;
    // With an engine to hand deliveries to, a PostgreSQL publish reads whole endpoint rows
    // rather than their filters alone; this one takes none, so every delivery stays pending.
    let engine: Arc<dyn Handoff> = Arc::new(TakesNothing);
    store.hand_off_new_deliveries(Arc::downgrade(&engine));
    publish_and_check_routes(store, &apps, &endpoints, 200).await;
}

/// An engine with no room for any new delivery.
struct TakesNothing;

impl Handoff for TakesNothing {
    fn reserve(&self, _endpoint: &EndpointId) -> Option<Reserved> {
        None
    }

    fn per_endpoint(&self) -> usize {
        0
    }
}

/// Publishes 200 messages to `apps` at once, created from `first` on, each application
/// seeing every event type and channel set, and checks that each was routed to the
/// `endpoints` its filters take.
async fn publish_and_check_routes(
    store: &dyn Store,
    apps: &[Application],
    endpoints: &[Endpoint],
    first: usize,
) {
    let takes = |uid: &str, event_type: &str, channels: &[&str]| match uid {
        "all" => true,
        "paid" => event_type == "order.paid",
        "eu" => channels.contains(&"eu"),
        "paid-eu" => event_type == "order.paid" && channels.contains(&"eu"),
        _ => false,
    };
    let channel_sets: [&[&str]; 4] = [&[], &["eu"], &["us"], &["eu", "us"]];
    let mut publishes = Vec::new();
    let mut expected = Vec::new();
    for i in 0..200_usize {
        // Every application sees every event type and channel set.
        let a = &apps[i % 4];
        let event_type = ["order.paid", "order.shipped"][(i / 4) % 2];
        let channels = channel_sets[(i / 8) % 4];
        let msg = message(
            a,
            event_type,
            None,
            (!channels.is_empty()).then_some(channels),
            i64::try_from(first + i).unwrap(),
        );
        let mut uids: Vec<String> = endpoints
            .iter()
            .filter(|ep| ep.app_id == a.id)
            .filter_map(|ep| ep.uid.clone())
            .filter(|uid| takes(uid, event_type, channels))
            .collect();
        uids.sort();
        publishes.push((msg, Route::Subscribers));
        expected.push(uids);
    }
    let verdicts = publish_at_once(store, &publishes).await;
    for (((msg, _), uids), verdict) in publishes.iter().zip(&expected).zip(verdicts) {
        assert_eq!(verdict, Ok(uids.len()), "{msg:?}");
        let mut routed = pending_routes(store, msg).await;
        routed.sort();
        assert_eq!(&routed, uids, "{msg:?}");
        assert_stored(store, msg).await;
    }
}

async fn concurrent_publishes_each_get_the_answer_they_would_get_alone(store: &dyn Store) {
    let a = app(None, 0);
    let gone = app(None, 1);
    store.create_app(&a).await.unwrap();
    store.create_app(&gone).await.unwrap();
    let kept = endpoint(&a, Some("kept"), None, None);
    let removed = endpoint(&a, Some("removed"), None, None);
    store.create_endpoint(&kept).await.unwrap();
    store.create_endpoint(&removed).await.unwrap();
    let old = message(&a, "order.paid", Some("evt-old"), None, 1);
    store.publish(NewMessage::new(old.clone())).await.unwrap();
    store.delete_endpoint(&removed).await.unwrap();
    store.delete_app(&gone.id).await.unwrap();
    let taken = |event_id: &str| {
        Err(format!(
            "conflict: a message with eventId {event_id:?} already exists in this application"
        ))
    };
    let to = |event_id: Option<&str>, created: i64| {
        (
            message(&a, "order.paid", event_id, None, created),
            Route::Subscribers,
        )
    };
    // Only taken event ids: in the database, and twice in the batch (the first publish wins).
    // Each message accepted goes to the one endpoint left.
    let round = [
        (to(None, 10), Ok(1)),
        (to(Some("evt-old"), 11), taken("evt-old")),
        (to(Some("evt-1"), 12), Ok(1)),
        (to(None, 13), Ok(1)),
        (to(Some("evt-1"), 14), taken("evt-1")),
        (to(Some("evt-2"), 15), Ok(1)),
    ];
    check_round(store, &round, "evt-1").await;
    // With a message for a deleted application and a test send to a deleted endpoint too.
    let round = [
        (to(None, 20), Ok(1)),
        (
            (
                message(&gone, "order.paid", None, None, 21),
                Route::Subscribers,
            ),
            Err("application not found".to_owned()),
        ),
        (to(Some("evt-3"), 22), Ok(1)),
        (
            (
                message(&a, "order.paid", None, None, 23),
                Route::Only(removed.id.clone()),
            ),
            Err("endpoint not found".to_owned()),
        ),
        (to(Some("evt-3"), 24), taken("evt-3")),
        (to(Some("evt-old"), 25), taken("evt-old")),
        (
            (
                message(&a, "order.paid", None, None, 26),
                Route::Only(kept.id.clone()),
            ),
            Ok(1),
        ),
        (to(Some("evt-4"), 27), Ok(1)),
    ];
    check_round(store, &round, "evt-3").await;
}

/// Publishes `round` at once and checks each verdict, that exactly the accepted messages were
/// written, and that `event_id`, taken twice in the round, went to its first publish.
async fn check_round(store: &dyn Store, round: &[(Publish, Verdict)], event_id: &str) {
    let publishes: Vec<Publish> = round.iter().map(|(p, _)| p.clone()).collect();
    let verdicts = publish_at_once(store, &publishes).await;
    let expected: Vec<Verdict> = round.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(verdicts, expected);
    for ((msg, _), verdict) in round {
        let stored = store
            .get_message(&msg.app_id, msg.id.as_str())
            .await
            .unwrap();
        assert_eq!(stored.is_some(), verdict.is_ok(), "{msg:?}");
        let deliveries = store
            .list_message_deliveries(&msg.app_id, msg)
            .await
            .unwrap();
        assert_eq!(deliveries.len(), *verdict.as_ref().unwrap_or(&0), "{msg:?}");
    }
    let first = round
        .iter()
        .map(|((msg, _), _)| msg)
        .find(|msg| msg.event_id.as_deref() == Some(event_id))
        .unwrap();
    let holder = store.get_message(&first.app_id, event_id).await.unwrap();
    assert_eq!(holder.as_ref(), Some(first));
}

async fn concurrent_publishes_to_an_app_without_endpoints_write_no_deliveries(store: &dyn Store) {
    let lonely = app(None, 0);
    let busy = app(None, 1);
    store.create_app(&lonely).await.unwrap();
    store.create_app(&busy).await.unwrap();
    store
        .create_endpoint(&endpoint(&busy, None, None, None))
        .await
        .unwrap();
    for apps in [vec![&lonely], vec![&lonely, &busy]] {
        let publishes: Vec<Publish> = (0..40)
            .map(|i| {
                let msg = message(
                    apps[i % apps.len()],
                    "order.paid",
                    None,
                    None,
                    10 + i as i64,
                );
                (msg, Route::Subscribers)
            })
            .collect();
        let verdicts = publish_at_once(store, &publishes).await;
        for ((msg, _), verdict) in publishes.iter().zip(verdicts) {
            let expected = usize::from(msg.app_id == busy.id);
            assert_eq!(verdict, Ok(expected), "{msg:?}");
            assert_stored(store, msg).await;
            let deliveries = store
                .list_message_deliveries(&msg.app_id, msg)
                .await
                .unwrap();
            assert_eq!(deliveries.len(), expected);
        }
    }
}

async fn idempotent_responses_keep_the_first_until_they_expire(store: &dyn Store) {
    let first = StoredResponse {
        status: 202,
        body: b"first".to_vec(),
    };
    let second = StoredResponse {
        status: 409,
        body: b"second".to_vec(),
    };
    store
        .put_idempotent_response("k", &first, at(0), at(1_000))
        .await
        .unwrap();
    store
        .put_idempotent_response("k", &second, at(100), at(2_000))
        .await
        .unwrap();
    assert_eq!(
        store.get_idempotent_response("k", at(500)).await.unwrap(),
        Some(first)
    );
    assert_eq!(
        store.get_idempotent_response("k", at(1_000)).await.unwrap(),
        None
    );
    store
        .put_idempotent_response("k", &second, at(1_500), at(3_000))
        .await
        .unwrap();
    assert_eq!(
        store.get_idempotent_response("k", at(1_500)).await.unwrap(),
        Some(second)
    );
}

/// A message carrying its application (Svix's inline `application`) whose write the store
/// refuses leaves no application behind: the application is made in the publish's own
/// transaction. The refusal here is the message's id, taken already by another message.
async fn a_refused_publish_makes_no_application(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let published = message(&a, "order.shipped", None, None, 10);
    store
        .publish(NewMessage::new(published.clone()))
        .await
        .unwrap();
    let carried = app(Some("new-shop"), 20);
    let taken_id = Message {
        app_id: carried.id.clone(),
        ..published.clone()
    };
    let scheduled = Message {
        deliver_at: Some(at(60_000)),
        ..taken_id.clone()
    };
    for refused in [&taken_id, &scheduled] {
        for expires in [None, Some(at(90_000))] {
            let outcome = store
                .publish(
                    NewMessage::new(refused.clone())
                        .in_app(carried.clone())
                        .expiring(expires),
                )
                .await;
            assert!(outcome.is_err(), "{outcome:?}");
            assert_eq!(
                store.get_app("new-shop").await.unwrap(),
                None,
                "a refused publish made its application"
            );
        }
    }
}

/// A message carrying its application goes to the application of that uid, made from it when
/// there is none, and routed to its endpoints when there is one; publishes racing to make one
/// application all land in it.
async fn a_publish_gets_or_makes_its_application(store: &dyn Store) {
    let shop = app(Some("shop"), 0);
    let first = message(&shop, "order.shipped", None, None, 10);
    let created = store
        .publish(NewMessage::new(first.clone()).in_app(shop.clone()))
        .await
        .unwrap();
    assert_eq!(
        (created.message.app_id, created.deliveries),
        (shop.id.clone(), 0)
    );
    assert_eq!(store.get_app("shop").await.unwrap(), Some(shop.clone()));
    store
        .create_endpoint(&endpoint(&shop, None, None, None))
        .await
        .unwrap();
    let again = app(Some("shop"), 20);
    let scheduled = Message {
        deliver_at: Some(at(60_000)),
        ..message(&again, "order.shipped", None, None, 30)
    };
    let created = store
        .publish(
            NewMessage::new(scheduled.clone())
                .in_app(again.clone())
                .expiring(Some(at(90_000))),
        )
        .await
        .unwrap();
    assert_eq!((&created.message.app_id, created.deliveries), (&shop.id, 1));
    assert_eq!(
        store.get_app("shop").await.unwrap(),
        Some(shop.clone()),
        "unchanged"
    );
    let routed = store
        .list_message_deliveries(&shop.id, &created.message)
        .await
        .unwrap();
    assert_eq!(
        routed[0].1.next_attempt_at,
        Some(at(60_000)),
        "due at deliverAt"
    );

    let racing = (0..20).map(|i| async move {
        let carried = app(Some("rush"), 100 + i);
        let msg = message(&carried, "order.shipped", None, None, 200 + i);
        store
            .publish(NewMessage::new(msg.clone()).in_app(carried.clone()))
            .await
    });
    let outcomes = futures::future::join_all(racing).await;
    let apps: HashSet<_> = outcomes
        .into_iter()
        .map(|o| o.expect("every racing publish lands").message.app_id)
        .collect();
    assert_eq!(apps.len(), 1, "one application made: {apps:?}");
    let rush = store.get_app("rush").await.unwrap().expect("made");
    assert!(apps.contains(&rush.id));
    let listed = store
        .list_messages(&rush.id, &MessageFilter::default(), &first_page(50))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 20);
}

behaviour!(
    a_refused_publish_makes_no_application,
    a_publish_gets_or_makes_its_application,
    concurrent_publishes_are_routed_each_by_its_own_filters,
    concurrent_publishes_each_get_the_answer_they_would_get_alone,
    concurrent_publishes_to_an_app_without_endpoints_write_no_deliveries,
    a_test_send_goes_to_its_endpoint_alone,
    idempotent_responses_keep_the_first_until_they_expire,
    concurrent_publishes_all_land,
);
