//! One behavioural suite for every `Store` implementation.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use std::sync::Arc;

use harness::fixtures::{app, at, endpoint, first_page, message};
use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, EventType, Message, SealedKeys,
    TriggerType,
};
use hookd_core::{AttemptId, EndpointId, MessageId};
use hookd_store::{
    ApiToken, AttemptFilter, Cursor, EndpointStats, EndpointUpdate, Handoff, KeySwap,
    MessageFilter, PageRequest, Reserved, Route, Store, StoreError, StoredResponse,
};

async fn apps_round_trip_and_look_up_by_id_or_uid(store: &dyn Store) {
    let a = app(Some("customer-1"), 0);
    store.create_app(&a).await.unwrap();
    assert_eq!(store.get_app(a.id.as_str()).await.unwrap(), Some(a.clone()));
    assert_eq!(store.get_app("customer-1").await.unwrap(), Some(a.clone()));
    assert_eq!(store.get_app("customer-2").await.unwrap(), None);

    let mut renamed = a.clone();
    renamed.name = "renamed".into();
    renamed.uid = None;
    renamed.updated_at = at(5);
    store.update_app(&renamed).await.unwrap();
    assert_eq!(store.get_app(a.id.as_str()).await.unwrap(), Some(renamed));
    assert_eq!(store.get_app("customer-1").await.unwrap(), None);
}

/// Looking up by "id or uid" (messages: id or `eventId`) finds the row with that id even when
/// another row's uid is the same text, on every backend.
async fn an_id_wins_over_another_rows_equal_uid(store: &dyn Store) {
    let first = app(None, 0);
    store.create_app(&first).await.unwrap();
    let second = app(Some(first.id.as_str()), 1);
    store.create_app(&second).await.unwrap();
    assert_eq!(
        store.get_app(first.id.as_str()).await.unwrap(),
        Some(first.clone())
    );

    let ep = endpoint(&first, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    let other = endpoint(&first, Some(ep.id.as_str()), None, None);
    store.create_endpoint(&other).await.unwrap();
    assert_eq!(
        store.get_endpoint(&first.id, ep.id.as_str()).await.unwrap(),
        Some(ep.clone())
    );

    let msg = message(&first, "a", None, None, 2);
    store.create_message(&msg).await.unwrap();
    let echo = message(&first, "a", Some(msg.id.as_str()), None, 3);
    store.create_message(&echo).await.unwrap();
    let found = store.get_message(&first.id, msg.id.as_str()).await.unwrap();
    assert_eq!(found.map(|m| m.id), Some(msg.id));
}

async fn duplicate_app_uid_is_a_conflict(store: &dyn Store) {
    store.create_app(&app(Some("dup"), 0)).await.unwrap();
    let second = store.create_app(&app(Some("dup"), 1)).await;
    assert!(
        matches!(second, Err(StoreError::Conflict(ref text)) if text.contains("dup")),
        "{second:?}"
    );
}

async fn missing_records_are_not_found(store: &dyn Store) {
    let ghost = app(None, 0);
    assert!(matches!(
        store.update_app(&ghost).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.delete_app(&ghost.id).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.delete_event_type("nope").await,
        Err(StoreError::NotFound(_))
    ));
}

async fn app_pages_go_forward_and_back(store: &dyn Store) {
    let apps: Vec<_> = (0..5).map(|i| app(None, i)).collect();
    for a in &apps {
        store.create_app(a).await.unwrap();
    }
    let ids = |page: &hookd_store::Page<Application>| {
        page.items.iter().map(|a| a.id.clone()).collect::<Vec<_>>()
    };
    let first = store.list_apps(&first_page(2)).await.unwrap();
    assert_eq!(ids(&first), vec![apps[0].id.clone(), apps[1].id.clone()]);
    assert!(first.has_more);
    let after = PageRequest {
        limit: 2,
        cursor: Some(Cursor::After(apps[1].id.to_string())),
    };
    let second = store.list_apps(&after).await.unwrap();
    assert_eq!(ids(&second), vec![apps[2].id.clone(), apps[3].id.clone()]);
    let last = store
        .list_apps(&PageRequest {
            limit: 2,
            cursor: Some(Cursor::After(apps[3].id.to_string())),
        })
        .await
        .unwrap();
    assert_eq!(ids(&last), vec![apps[4].id.clone()]);
    assert!(!last.has_more);
    let back = store
        .list_apps(&PageRequest {
            limit: 2,
            cursor: Some(Cursor::Before(apps[2].id.to_string())),
        })
        .await
        .unwrap();
    assert_eq!(ids(&back), vec![apps[0].id.clone(), apps[1].id.clone()]);
    assert!(!back.has_more);
}

async fn endpoints_round_trip_with_uids_scoped_to_their_app(store: &dyn Store) {
    let (a, b) = (app(None, 0), app(None, 1));
    store.create_app(&a).await.unwrap();
    store.create_app(&b).await.unwrap();
    let ep = endpoint(&a, Some("primary"), Some(&["order.shipped"]), Some(&["eu"]));
    store.create_endpoint(&ep).await.unwrap();
    assert_eq!(
        store.get_endpoint(&a.id, "primary").await.unwrap(),
        Some(ep.clone())
    );
    assert_eq!(
        store.get_endpoint(&a.id, ep.id.as_str()).await.unwrap(),
        Some(ep.clone())
    );
    assert_eq!(
        store.get_endpoint(&b.id, ep.id.as_str()).await.unwrap(),
        None
    );

    let clash = endpoint(&a, Some("primary"), None, None);
    assert!(matches!(
        store.create_endpoint(&clash).await,
        Err(StoreError::Conflict(_))
    ));
    store
        .create_endpoint(&endpoint(&b, Some("primary"), None, None))
        .await
        .unwrap();

    let mut changed = ep.clone();
    changed.disabled = true;
    changed.disabled_reason = Some("paused".into());
    changed.disabled_at = Some(at(9));
    changed.timeout_secs = None;
    changed.max_concurrency = Some(2);
    changed.event_types = None;
    changed.headers.clear();
    changed.updated_at = at(9);
    store.update_endpoint(&changed).await.unwrap();
    assert_eq!(
        store.get_endpoint(&a.id, "primary").await.unwrap(),
        Some(changed.clone())
    );
    assert_eq!(
        store
            .list_endpoints(&a.id, &first_page(10))
            .await
            .unwrap()
            .items,
        vec![changed.clone()]
    );
    store.delete_endpoint(&changed).await.unwrap();
    assert_eq!(store.get_endpoint(&a.id, "primary").await.unwrap(), None);
}

async fn archived_event_types_are_listed_only_on_request(store: &dyn Store) {
    let event_type = |name: &str, archived: bool| EventType {
        name: name.into(),
        description: format!("{name} happened"),
        schemas: Some(serde_json::json!({"1": {"type": "object"}})),
        archived,
        deprecated: false,
        feature_flag: None,
        created_at: at(0),
        updated_at: at(0),
    };
    store
        .create_event_type(&event_type("order.shipped", false))
        .await
        .unwrap();
    store
        .create_event_type(&event_type("order.old", true))
        .await
        .unwrap();
    let dup = store
        .create_event_type(&event_type("order.shipped", false))
        .await;
    assert!(matches!(dup, Err(StoreError::Conflict(_))));
    let names = |archived| async move {
        let page = store
            .list_event_types(&first_page(10), archived)
            .await
            .unwrap();
        page.items.into_iter().map(|e| e.name).collect::<Vec<_>>()
    };
    assert_eq!(names(false).await, vec!["order.shipped"]);
    assert_eq!(names(true).await, vec!["order.old", "order.shipped"]);
    let mut updated = event_type("order.shipped", true);
    updated.description = "changed".into();
    store.update_event_type(&updated).await.unwrap();
    assert_eq!(
        store.get_event_type("order.shipped").await.unwrap(),
        Some(updated)
    );
    store.delete_event_type("order.old").await.unwrap();
    assert_eq!(store.get_event_type("order.old").await.unwrap(), None);
}

/// Asserts that the store holds `msg` as it was published.
async fn assert_stored(store: &dyn Store, msg: &Message) {
    let stored = store
        .get_message(&msg.app_id, msg.id.as_str())
        .await
        .unwrap();
    assert_eq!(stored.as_ref(), Some(msg), "{msg:?}");
}

/// The uids of the endpoints `msg` was routed to, in the order the store lists them; each
/// delivery must be pending and due when the message was created.
async fn pending_routes(store: &dyn Store, msg: &Message) -> Vec<String> {
    store
        .list_message_deliveries(&msg.app_id, msg)
        .await
        .unwrap()
        .into_iter()
        .map(|(ep, delivery)| {
            assert_eq!(delivery.status, DeliveryStatus::Pending);
            assert_eq!(delivery.next_attempt_at, Some(msg.created_at));
            ep.uid.unwrap()
        })
        .collect()
}

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
    let created = store.create_message(&msg).await.unwrap();
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
    store.create_message(&first).await.unwrap();
    let again = message(&a, "order.shipped", Some("evt-1"), None, 11);
    let outcome = store.create_message(&again).await;
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
        .create_message(&message(
            &other_app,
            "order.shipped",
            Some("evt-1"),
            None,
            12,
        ))
        .await
        .unwrap();
}

async fn messages_list_newest_first_with_filters(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let m1 = message(&a, "order.shipped", None, Some(&["eu"]), 100);
    let m2 = message(&a, "order.paid", None, None, 200);
    let m3 = message(&a, "order.shipped", None, Some(&["us", "eu"]), 300);
    for m in [&m1, &m2, &m3] {
        store.create_message(m).await.unwrap();
    }
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

/// An attempt on `msg` to `ep` at `offset` that leaves its delivery in `status`.
async fn finish(
    store: &dyn Store,
    msg: &Message,
    ep: &Endpoint,
    offset: i64,
    status: DeliveryStatus,
) {
    let succeeded = status == DeliveryStatus::Success;
    let attempt = Attempt {
        id: AttemptId::new(at(offset)),
        message_id: msg.id.clone(),
        endpoint_id: ep.id.clone(),
        url: ep.url.clone(),
        response_status_code: if succeeded { 200 } else { 500 },
        response: String::new(),
        response_head: String::new(),
        response_duration_ms: 3,
        status: if succeeded {
            status
        } else {
            DeliveryStatus::Fail
        },
        trigger_type: TriggerType::Scheduled,
        created_at: at(offset),
    };
    let delivery = Delivery {
        message_id: msg.id.clone(),
        endpoint_id: ep.id.clone(),
        status,
        attempt_count: 1,
        next_attempt_at: (status == DeliveryStatus::Pending).then(|| at(offset + 5_000)),
        updated_at: at(offset),
    };
    store.record_attempt(&attempt, &delivery).await.unwrap();
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
        store.create_message(m).await.unwrap();
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

async fn endpoint_stats_count_a_periods_deliveries_and_attempts(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    let old = message(&a, "order.shipped", None, None, 10);
    let ok = message(&a, "order.shipped", None, None, 1_000);
    let bad = message(&a, "order.shipped", None, None, 1_001);
    let queued = message(&a, "order.shipped", None, None, 1_999);
    for m in [&old, &ok, &bad, &queued] {
        store.create_message(m).await.unwrap();
    }
    finish(store, &old, &ep, 1_500, DeliveryStatus::Fail).await;
    finish(store, &ok, &ep, 1_600, DeliveryStatus::Success).await;
    finish(store, &bad, &ep, 1_700, DeliveryStatus::Fail).await;
    let stats = store
        .endpoint_stats(&ep, at(1_000), at(2_000))
        .await
        .unwrap();
    assert_eq!(
        stats,
        EndpointStats {
            success: 1,
            pending: 1,
            sending: 0,
            fail: 1,
            attempts: 3,
            successful_attempts: 1,
        },
        "the message created before the period is not counted; its attempt in it is"
    );
    let empty = store
        .endpoint_stats(&ep, at(2_000), at(3_000))
        .await
        .unwrap();
    assert_eq!(empty, EndpointStats::default());
}

async fn attempts_are_recorded_and_listed(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    let msg = message(&a, "order.shipped", None, None, 10);
    store.create_message(&msg).await.unwrap();
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

async fn deleting_an_app_removes_everything_it_owns(store: &dyn Store) {
    let a = app(Some("gone"), 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    let msg = message(&a, "order.shipped", None, None, 10);
    store.create_message(&msg).await.unwrap();
    store.delete_app(&a.id).await.unwrap();
    assert_eq!(store.get_app("gone").await.unwrap(), None);
    assert_eq!(
        store.get_endpoint(&a.id, ep.id.as_str()).await.unwrap(),
        None
    );
    assert_eq!(
        store.get_message(&a.id, msg.id.as_str()).await.unwrap(),
        None
    );
}

async fn tokens_are_found_by_hash(store: &dyn Store) {
    assert!(!store.has_admin_token().await.unwrap());
    let token = ApiToken {
        id: "tok_1".into(),
        token_hash: "ab".repeat(32),
        app_id: None,
        created_at: at(0),
        expires_at: Some(at(9_000)),
        name: "deploys".into(),
        revoked_at: None,
        rate_limit: Some(7),
        read_only: true,
    };
    store.create_token(&token).await.unwrap();
    assert!(store.has_admin_token().await.unwrap());
    assert_eq!(
        store.find_token(&"ab".repeat(32)).await.unwrap(),
        Some(token)
    );
    assert_eq!(store.find_token(&"cd".repeat(32)).await.unwrap(), None);
}

async fn revoked_tokens_stay_listed_and_stop_counting_as_admin(store: &dyn Store) {
    let app = app(Some("acme"), 0);
    store.create_app(&app).await.unwrap();
    for (id, app_id) in [("tok_a", None), ("tok_b", Some(app.id.clone()))] {
        let token = ApiToken {
            id: id.into(),
            token_hash: id.repeat(8),
            app_id,
            created_at: at(0),
            ..ApiToken::default()
        };
        store.create_token(&token).await.unwrap();
    }
    store.revoke_token("tok_a", at(5)).await.unwrap();
    store.revoke_token("tok_a", at(9)).await.unwrap();
    assert!(!store.has_admin_token().await.unwrap());
    assert!(matches!(
        store.revoke_token("tok_none", at(5)).await,
        Err(StoreError::NotFound("token"))
    ));
    let first = PageRequest {
        limit: 1,
        cursor: None,
    };
    let page = store.list_tokens(&first).await.unwrap();
    assert!(page.has_more);
    assert_eq!(page.items[0].id, "tok_a");
    assert_eq!(
        page.items[0].revoked_at,
        Some(at(5)),
        "the first revocation stands"
    );
    let rest = PageRequest {
        limit: 10,
        cursor: Some(Cursor::After("tok_a".into())),
    };
    let page = store.list_tokens(&rest).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].app_id, Some(app.id.clone()));
}

async fn endpoint_keys_change_only_by_compare_and_swap(store: &dyn Store) {
    let a = app(Some("acme"), 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    let rotated = SealedKeys::from_stored("hk1:test:rotated".into());
    let stale = SealedKeys::from_stored("hk1:test:stale".into());
    assert!(
        !store
            .replace_endpoint_keys(&ep.id, &stale, &rotated, at(2))
            .await
            .unwrap(),
        "keys that changed meanwhile are not overwritten"
    );
    assert!(
        store
            .replace_endpoint_keys(&ep.id, &ep.keys, &rotated, at(2))
            .await
            .unwrap()
    );
    let mut edited = ep.clone();
    edited.description = "edited".into();
    store.update_endpoint(&edited).await.unwrap();
    let stored = store
        .get_endpoint(&a.id, ep.id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.keys, rotated, "an update leaves the keys alone");
    assert_eq!(stored.description, "edited");
    let ghost = EndpointId::new(at(3));
    assert!(matches!(
        store
            .replace_endpoint_keys(&ghost, &rotated, &stale, at(3))
            .await,
        Err(StoreError::NotFound("endpoint"))
    ));
    let all = store.list_sealed_keys(None, 10).await.unwrap();
    assert_eq!(all, vec![(ep.id.clone(), rotated)]);
    assert!(
        store
            .list_sealed_keys(Some(&ep.id), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// An endpoint's row and its keys are written in one transaction: both, or (when the keys
/// changed meanwhile) neither.
async fn an_endpoint_and_its_keys_change_together_or_not_at_all(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    let stored = async || {
        store
            .get_endpoint(&a.id, ep.id.as_str())
            .await
            .unwrap()
            .unwrap()
    };

    let stale = SealedKeys::from_stored("hk1:test:stale".into());
    let lost = SealedKeys::from_stored("hk1:test:lost".into());
    let mut refused = ep.clone();
    refused.url = "https://refused.example/hook".into();
    let written = store
        .update_endpoint_with(&EndpointUpdate {
            keys: Some(KeySwap {
                old: &stale,
                new: &lost,
            }),
            ..EndpointUpdate::new(&refused)
        })
        .await
        .unwrap();
    assert!(!written, "keys changed meanwhile: nothing is written");
    assert_eq!(stored().await, ep, "neither the row nor the keys");

    let rotated = SealedKeys::from_stored("hk1:test:rotated".into());
    let mut changed = ep.clone();
    changed.url = "https://changed.example/hook".into();
    let written = store
        .update_endpoint_with(&EndpointUpdate {
            keys: Some(KeySwap {
                old: &ep.keys,
                new: &rotated,
            }),
            ..EndpointUpdate::new(&changed)
        })
        .await
        .unwrap();
    assert!(written);
    let now = stored().await;
    assert_eq!(
        (now.url.as_str(), &now.keys),
        (changed.url.as_str(), &rotated)
    );
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
        async move { store.create_message(&msg).await }
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
        .create_routed_message(&msg, &Route::Only(target.id.clone()))
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
        .create_routed_message(&orphan, &Route::Only(ghost))
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
    let outcomes = futures::future::join_all(
        publishes
            .iter()
            .map(|(message, route)| store.create_routed_message(message, route)),
    )
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
    store.create_message(&old).await.unwrap();
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

/// An API edit is read, modify, write: built on a read from before hookd disabled the
/// endpoint, it must not carry the stale `disabled: false` back (re-enabling a dead endpoint
/// because someone fixed its description). Asking for a state is another matter.
async fn an_edit_built_before_hookd_disabled_the_endpoint_is_refused(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    assert!(
        store
            .disable_endpoint(&ep.id, "the endpoint answered 410 Gone", at(2), &[])
            .await
            .unwrap()
    );
    let mut edited = ep.clone();
    edited.description = "edited".into();
    let refused = store
        .update_endpoint_with(&EndpointUpdate {
            endpoint: &edited,
            disabled_as_read: Some(false),
            events: &[],
            on_toggle: &[],
            keys: None,
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(ref why)) if why.contains("disabled")),
        "{refused:?}"
    );
    let stored = store
        .get_endpoint(&a.id, ep.id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert!(stored.disabled, "still disabled");
    assert_eq!(
        stored.description, ep.description,
        "nothing of the edit written"
    );
    // Disabling it too, on the same stale read, asks for the state it has: written.
    let mut off = edited.clone();
    off.disabled = true;
    store
        .update_endpoint_with(&EndpointUpdate {
            endpoint: &off,
            disabled_as_read: Some(false),
            events: &[],
            on_toggle: &[],
            keys: None,
        })
        .await
        .unwrap();
    // Enabling it on a read that saw it disabled: written.
    let mut on = store
        .get_endpoint(&a.id, ep.id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(on.description, "edited");
    on.disabled = false;
    store
        .update_endpoint_with(&EndpointUpdate {
            endpoint: &on,
            disabled_as_read: Some(true),
            events: &[],
            on_toggle: &[],
            keys: None,
        })
        .await
        .unwrap();
    let stored = store
        .get_endpoint(&a.id, ep.id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert!(!stored.disabled);
}

behaviour!(
    concurrent_publishes_are_routed_each_by_its_own_filters,
    concurrent_publishes_each_get_the_answer_they_would_get_alone,
    concurrent_publishes_to_an_app_without_endpoints_write_no_deliveries,
    a_test_send_goes_to_its_endpoint_alone,
    apps_round_trip_and_look_up_by_id_or_uid,
    an_id_wins_over_another_rows_equal_uid,
    duplicate_app_uid_is_a_conflict,
    missing_records_are_not_found,
    app_pages_go_forward_and_back,
    endpoints_round_trip_with_uids_scoped_to_their_app,
    archived_event_types_are_listed_only_on_request,
    a_message_is_routed_to_subscribed_enabled_endpoints_only,
    a_repeated_event_id_is_a_conflict_and_writes_nothing,
    messages_list_newest_first_with_filters,
    messages_are_searched_by_delivery_status_within_their_app,
    endpoint_stats_count_a_periods_deliveries_and_attempts,
    attempts_are_recorded_and_listed,
    deleting_an_app_removes_everything_it_owns,
    tokens_are_found_by_hash,
    revoked_tokens_stay_listed_and_stop_counting_as_admin,
    endpoint_keys_change_only_by_compare_and_swap,
    an_endpoint_and_its_keys_change_together_or_not_at_all,
    an_edit_built_before_hookd_disabled_the_endpoint_is_refused,
    idempotent_responses_keep_the_first_until_they_expire,
    concurrent_publishes_all_land,
);
