//! Endpoints: created, found, counted, changed (with their keys, and never on a stale read of whether they are disabled), and their statistics.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use std::collections::BTreeMap;

use harness::checks::finish;
use harness::fixtures::{app, at, endpoint, first_page, message};
use hookd_core::EndpointId;
use hookd_core::model::{DeliveryStatus, SealedKeys};
use std::time::Duration;

use hookd_store::{
    EndpointStats, EndpointUpdate, HealthBucket, HealthWindow, KeySwap, NewMessage, SealedRow,
    Store, StoreError,
};

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

async fn endpoints_are_counted_per_application(store: &dyn Store) {
    let (a, b) = (app(None, 0), app(None, 1));
    store.create_app(&a).await.unwrap();
    store.create_app(&b).await.unwrap();
    assert_eq!(store.count_endpoints(&a.id).await.unwrap(), 0);
    let first = endpoint(&a, None, None, None);
    store.create_endpoint(&first).await.unwrap();
    store
        .create_endpoint(&endpoint(&a, Some("second"), None, None))
        .await
        .unwrap();
    store
        .create_endpoint(&endpoint(&b, None, None, None))
        .await
        .unwrap();
    assert_eq!(store.count_endpoints(&a.id).await.unwrap(), 2);
    assert_eq!(store.count_endpoints(&b.id).await.unwrap(), 1);
    store.delete_endpoint(&first).await.unwrap();
    assert_eq!(store.count_endpoints(&a.id).await.unwrap(), 1);
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
        store.publish(NewMessage::new(m.clone())).await.unwrap();
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

async fn endpoint_history_counts_attempts_and_waiting_deliveries_per_slice(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    let before = message(&a, "order.shipped", None, None, 500);
    let first = message(&a, "order.shipped", None, None, 1_100);
    let retried = message(&a, "order.shipped", None, None, 2_100);
    let queued = message(&a, "order.shipped", None, None, 3_500);
    let after = message(&a, "order.shipped", None, None, 6_000);
    for m in [&before, &first, &retried, &queued, &after] {
        store.publish(NewMessage::new(m.clone())).await.unwrap();
    }
    finish(store, &first, &ep, 1_200, DeliveryStatus::Success).await;
    finish(store, &retried, &ep, 2_500, DeliveryStatus::Pending).await;
    finish(store, &before, &ep, 3_100, DeliveryStatus::Success).await;
    let window = HealthWindow {
        since: at(1_000),
        bucket: Duration::from_secs(1),
        buckets: 3,
    };
    let history = store.endpoint_history(&ep, &window).await.unwrap();
    let slice = |succeeded, failed, pending| HealthBucket {
        succeeded,
        failed,
        pending,
    };
    assert_eq!(
        history,
        vec![slice(1, 0, 0), slice(0, 1, 1), slice(1, 0, 1)],
        "attempts by when they were made, waiting deliveries by their message's creation; \
         the message created after the window is not counted"
    );

    let oldest = store.oldest_pending(&ep).await.unwrap().unwrap();
    assert_eq!(oldest.message_id, retried.id);
    assert_eq!(oldest.created_at, at(2_100));
    for m in [&retried, &queued, &after] {
        finish(store, m, &ep, 7_000, DeliveryStatus::Fail).await;
    }
    assert_eq!(store.oldest_pending(&ep).await.unwrap(), None);
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
    let row = SealedRow {
        id: ep.id.clone(),
        keys: rotated.clone(),
        headers: ep.headers.clone(),
    };
    assert_eq!(all, vec![row.clone()]);
    let resealed = SealedRow {
        keys: SealedKeys::from_stored("hk1:test:resealed".into()),
        headers: BTreeMap::new(),
        ..row
    };
    assert!(
        !store
            .replace_sealed_row(&stale, &resealed, at(4))
            .await
            .unwrap(),
        "a row whose keys changed meanwhile is left alone"
    );
    assert!(
        store
            .replace_sealed_row(&rotated, &resealed, at(4))
            .await
            .unwrap()
    );
    assert_eq!(
        store.list_sealed_keys(None, 10).await.unwrap(),
        vec![resealed]
    );
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
    endpoints_round_trip_with_uids_scoped_to_their_app,
    endpoints_are_counted_per_application,
    endpoint_stats_count_a_periods_deliveries_and_attempts,
    endpoint_history_counts_attempts_and_waiting_deliveries_per_slice,
    endpoint_keys_change_only_by_compare_and_swap,
    an_endpoint_and_its_keys_change_together_or_not_at_all,
    an_edit_built_before_hookd_disabled_the_endpoint_is_refused,
);
