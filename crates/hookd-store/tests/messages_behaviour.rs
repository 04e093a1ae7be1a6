//! Messages and their attempts: routed to the endpoints that take them, listed, searched.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use harness::checks::{finish, pending_routes};
use harness::fixtures::{app, at, endpoint, first_page, message};
use hookd_core::model::{Attempt, Delivery, DeliveryStatus, TriggerType};
use hookd_core::{AttemptId, MessageId};
use hookd_store::{
    AttemptFilter, Cursor, DeliveryTally, MessageFilter, NewMessage, PageRequest, Store, StoreError,
};

async fn a_message_is_routed_to_subscribed_enabled_endpoints_only(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let all = endpoint(&a, Some("all"), None, None);
    let shipped = endpoint(&a, Some("shipped"), Some(&["order.shipped"]), None);
    let paid = endpoint(&a, Some("paid"), Some(&["order.paid"]), None);
    let eu = endpoint(&a, Some("eu"), None, Some(&["eu"]));
    let mut off = endpoint(&a, Some("off"), None, None);
    off.disabled = true;
    for ep in [&all, &shipped, &paid, &eu, &off] {
        store.create_endpoint(ep).await.unwrap();
    }
    let msg = message(&a, "order.shipped", None, Some(&["us"]), 10);
    let created = store.publish(NewMessage::new(msg.clone())).await.unwrap();
    assert_eq!(created.deliveries, 2);
    let routed = pending_routes(store, &msg).await;
    let mut expected = vec!["all".to_owned(), "shipped".to_owned()];
    expected.sort_by_key(|uid| {
        if uid == "all" {
            all.id.clone()
        } else {
            shipped.id.clone()
        }
    });
    assert_eq!(routed, expected);
    assert_eq!(
        store.get_message(&a.id, msg.id.as_str()).await.unwrap(),
        Some(msg)
    );
}

async fn a_repeated_event_id_is_a_conflict_and_writes_nothing(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    store
        .create_endpoint(&endpoint(&a, None, None, None))
        .await
        .unwrap();
    let first = message(&a, "order.shipped", Some("evt-1"), None, 10);
    store.publish(NewMessage::new(first.clone())).await.unwrap();
    let again = message(&a, "order.shipped", Some("evt-1"), None, 11);
    let outcome = store.publish(NewMessage::new(again.clone())).await;
    assert!(
        matches!(outcome, Err(StoreError::Conflict(ref text)) if text.contains("evt-1")),
        "{outcome:?}"
    );
    assert_eq!(
        store.get_message(&a.id, again.id.as_str()).await.unwrap(),
        None
    );
    assert_eq!(
        store.get_message(&a.id, "evt-1").await.unwrap(),
        Some(first)
    );
    let other_app = app(None, 1);
    store.create_app(&other_app).await.unwrap();
    store
        .publish(NewMessage::new(message(
            &other_app,
            "order.shipped",
            Some("evt-1"),
            None,
            12,
        )))
        .await
        .unwrap();
}

async fn messages_list_newest_first_with_filters_and_keep_their_tags(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let m1 = message(&a, "order.shipped", None, Some(&["eu"]), 100);
    let mut m2 = message(&a, "order.paid", None, None, 200);
    m2.tags = Some(vec!["project/7".into(), "vip".into()]);
    let m3 = message(&a, "order.shipped", None, Some(&["us", "eu"]), 300);
    for m in [&m1, &m2, &m3] {
        store.publish(NewMessage::new(m.clone())).await.unwrap();
    }
    let stored = store.get_message(&a.id, m2.id.as_str()).await.unwrap();
    assert_eq!(stored.as_ref(), Some(&m2), "tags kept");
    let app_id = &a.id;
    let list = |filter: MessageFilter| async move {
        let page = store
            .list_messages(app_id, &filter, &first_page(10))
            .await
            .unwrap();
        page.items.into_iter().map(|m| m.id).collect::<Vec<_>>()
    };
    assert_eq!(
        list(MessageFilter::default()).await,
        vec![m3.id.clone(), m2.id.clone(), m1.id.clone()]
    );
    let shipped = MessageFilter {
        event_types: Some(vec!["order.shipped".into()]),
        ..Default::default()
    };
    assert_eq!(list(shipped).await, vec![m3.id.clone(), m1.id.clone()]);
    let us = MessageFilter {
        channel: Some("us".into()),
        ..Default::default()
    };
    assert_eq!(list(us).await, vec![m3.id.clone()]);
    let vip = MessageFilter {
        tag: Some("vip".into()),
        ..Default::default()
    };
    assert_eq!(list(vip).await, vec![m2.id.clone()]);
    let window = MessageFilter {
        after: Some(at(100)),
        before: Some(at(300)),
        ..Default::default()
    };
    assert_eq!(list(window).await, vec![m2.id.clone()]);
    let paged = store
        .list_messages(
            &a.id,
            &MessageFilter::default(),
            &PageRequest {
                limit: 1,
                cursor: Some(Cursor::After(m3.id.to_string())),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        paged.items.iter().map(|m| m.id.clone()).collect::<Vec<_>>(),
        vec![m2.id.clone()]
    );
    assert!(paged.has_more);
}

async fn messages_are_searched_by_delivery_status_within_their_app(store: &dyn Store) {
    let (a, other) = (app(None, 0), app(None, 1));
    store.create_app(&a).await.unwrap();
    store.create_app(&other).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    let elsewhere = endpoint(&other, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    store.create_endpoint(&elsewhere).await.unwrap();
    let delivered = message(&a, "order.shipped", None, None, 100);
    let failed = message(&a, "order.shipped", None, None, 200);
    let retrying = message(&a, "order.paid", None, None, 300);
    let waiting = message(&a, "order.paid", None, None, 400);
    let failed_elsewhere = message(&other, "order.shipped", None, None, 250);
    for m in [&delivered, &failed, &retrying, &waiting, &failed_elsewhere] {
        store.publish(NewMessage::new(m.clone())).await.unwrap();
    }
    finish(store, &delivered, &ep, 1_000, DeliveryStatus::Success).await;
    finish(store, &failed, &ep, 1_100, DeliveryStatus::Fail).await;
    finish(store, &retrying, &ep, 1_200, DeliveryStatus::Pending).await;
    finish(
        store,
        &failed_elsewhere,
        &elsewhere,
        1_300,
        DeliveryStatus::Fail,
    )
    .await;
    let search = |status: DeliveryStatus, after: Option<i64>| {
        let filter = MessageFilter {
            status: Some(status),
            after: after.map(at),
            ..Default::default()
        };
        let app_id = a.id.clone();
        async move {
            let page = store
                .list_messages(&app_id, &filter, &first_page(10))
                .await
                .unwrap();
            page.items.into_iter().map(|m| m.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(
        search(DeliveryStatus::Success, None).await,
        vec![delivered.id.clone()]
    );
    assert_eq!(
        search(DeliveryStatus::Fail, None).await,
        vec![failed.id.clone()]
    );
    assert_eq!(
        search(DeliveryStatus::Pending, None).await,
        vec![waiting.id.clone(), retrying.id.clone()],
        "pending: never attempted, or waiting for a retry"
    );
    assert_eq!(
        search(DeliveryStatus::Pending, Some(300)).await,
        vec![waiting.id.clone()],
        "after is strict"
    );
    assert_eq!(
        search(DeliveryStatus::Fail, Some(200)).await,
        Vec::<MessageId>::new()
    );
}

async fn deliveries_are_tallied_per_message_for_a_list_page(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let endpoints: Vec<_> = (0..3).map(|_| endpoint(&a, None, None, None)).collect();
    for ep in &endpoints {
        store.create_endpoint(ep).await.unwrap();
    }
    let mixed = message(&a, "order.shipped", None, None, 100);
    let untouched = message(&a, "order.shipped", None, None, 200);
    let not_asked = message(&a, "order.shipped", None, None, 300);
    for m in [&mixed, &untouched, &not_asked] {
        store.publish(NewMessage::new(m.clone())).await.unwrap();
    }
    finish(store, &mixed, &endpoints[0], 1_000, DeliveryStatus::Success).await;
    finish(store, &mixed, &endpoints[1], 1_100, DeliveryStatus::Fail).await;

    let tallies = store
        .delivery_tallies(&[mixed.id.clone(), untouched.id.clone()])
        .await
        .unwrap();
    let tally = |succeeded, pending, failed| DeliveryTally {
        succeeded,
        pending,
        failed,
    };
    assert_eq!(tallies.len(), 2, "only the messages asked for: {tallies:?}");
    assert_eq!(tallies[&mixed.id], tally(1, 1, 1));
    assert_eq!(tallies[&untouched.id], tally(0, 3, 0));
    assert!(store.delivery_tallies(&[]).await.unwrap().is_empty());
}

async fn attempts_are_recorded_and_listed(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    let msg = message(&a, "order.shipped", None, None, 10);
    store.publish(NewMessage::new(msg.clone())).await.unwrap();
    let attempt = |offset: i64, code: i16, status: DeliveryStatus| Attempt {
        id: AttemptId::new(at(offset)),
        message_id: msg.id.clone(),
        endpoint_id: ep.id.clone(),
        url: ep.url.clone(),
        response_status_code: code,
        response: format!("HTTP {code}"),
        response_head: format!("HTTP/1.1 {code}\r\ncontent-type: text/plain\r\n"),
        response_duration_ms: 12,
        status,
        trigger_type: TriggerType::Scheduled,
        created_at: at(offset),
    };
    let failed = attempt(20, 500, DeliveryStatus::Fail);
    let retry_due = Delivery {
        message_id: msg.id.clone(),
        endpoint_id: ep.id.clone(),
        status: DeliveryStatus::Pending,
        attempt_count: 1,
        next_attempt_at: Some(at(5_020)),
        updated_at: at(20),
        ordering_key: None,
    };
    store.record_attempt(&failed, &retry_due).await.unwrap();
    let succeeded = attempt(5_030, 200, DeliveryStatus::Success);
    let done = Delivery {
        status: DeliveryStatus::Success,
        attempt_count: 2,
        next_attempt_at: None,
        updated_at: at(5_030),
        ..retry_due.clone()
    };
    store.record_attempt(&succeeded, &done).await.unwrap();

    let by_message = store
        .list_attempts_by_message(&a.id, &msg, &AttemptFilter::default(), &first_page(10))
        .await
        .unwrap();
    assert_eq!(by_message.items, vec![succeeded.clone(), failed.clone()]);
    let only_failed = AttemptFilter {
        status: Some(DeliveryStatus::Fail),
        ..Default::default()
    };
    let by_endpoint = store
        .list_attempts_by_endpoint(&ep, &only_failed, &first_page(10))
        .await
        .unwrap();
    assert_eq!(by_endpoint.items, vec![failed.clone()]);
    assert_eq!(
        store.get_attempt(&msg, failed.id.as_str()).await.unwrap(),
        Some(failed)
    );
    let deliveries = store
        .list_endpoint_deliveries(&ep, &AttemptFilter::default(), &first_page(10))
        .await
        .unwrap();
    assert_eq!(deliveries.items, vec![(msg.clone(), done.clone())]);
    assert_eq!(
        store.list_message_deliveries(&a.id, &msg).await.unwrap(),
        vec![(ep.clone(), done)]
    );
}

behaviour!(
    a_message_is_routed_to_subscribed_enabled_endpoints_only,
    a_repeated_event_id_is_a_conflict_and_writes_nothing,
    messages_list_newest_first_with_filters_and_keep_their_tags,
    messages_are_searched_by_delivery_status_within_their_app,
    deliveries_are_tallied_per_message_for_a_list_page,
    attempts_are_recorded_and_listed,
);
