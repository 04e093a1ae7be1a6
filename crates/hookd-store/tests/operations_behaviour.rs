//! Operational webhooks in the store, on every `Store` implementation: the operations
//! application is made once; each state change writes the events it is given in its own
//! transaction, routed to the subscribed operations endpoints, and a change that does not
//! happen writes none. So a crash can never keep a change and lose its event, or the reverse:
//! each test reads the tables right after the call, with no engine running.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use hookd_core::EndpointId;
use hookd_core::model::{Application, Delivery, DeliveryStatus, Endpoint, Message};
use hookd_core::operations::{
    APP_UID, AttemptEvent, AttemptRef, DisableTrigger, EVENT_TYPES, EndpointRef, OperationalEvent,
};
use hookd_store::{
    AttemptRecord, EndpointUpdate, Recorded, Store, StoreError, ensure_operations_app,
};

use harness::fixtures::{app, at, endpoint};
use harness::queue::{LEASE_MS, app_with_endpoints, attempt, claim, publish};

/// The operations application with two endpoints: one taking every event, one only
/// `endpoint.created` and `endpoint.disabled`.
async fn operations(store: &dyn Store) -> (Application, Endpoint, Endpoint) {
    let ops = ensure_operations_app(store, at(0)).await.unwrap();
    // Ids in creation order, which is the order deliveries are listed in.
    let everything = endpoint(&ops, Some("everything"), None, None);
    let mut some = endpoint(
        &ops,
        Some("some"),
        Some(&["endpoint.created", "endpoint.disabled"]),
        None,
    );
    some.id = EndpointId::new(at(2));
    store.create_endpoint(&everything).await.unwrap();
    store.create_endpoint(&some).await.unwrap();
    (ops, everything, some)
}

/// The operations endpoints `event` was routed to, with their deliveries; `None` if the event
/// was never written.
async fn routed(
    store: &dyn Store,
    ops: &Application,
    event: &Message,
) -> Option<Vec<(EndpointId, Delivery)>> {
    let stored = store
        .get_message(&ops.id, event.id.as_str())
        .await
        .unwrap()?;
    assert_eq!(&stored, event, "stored as given, payload bytes and all");
    let deliveries = store
        .list_message_deliveries(&ops.id, &stored)
        .await
        .unwrap();
    Some(deliveries.into_iter().map(|(e, d)| (e.id, d)).collect())
}

/// The endpoint ids of [`routed`], each delivery checked to be pending and due at once.
async fn routed_to(
    store: &dyn Store,
    ops: &Application,
    event: &Message,
) -> Option<Vec<EndpointId>> {
    let routed = routed(store, ops, event).await?;
    for (_, delivery) in &routed {
        assert_eq!(delivery.status, DeliveryStatus::Pending);
        assert_eq!(delivery.attempt_count, 0);
        assert_eq!(delivery.next_attempt_at, Some(event.created_at));
    }
    Some(routed.into_iter().map(|(e, _)| e).collect())
}

fn told(ops: &Application, event: OperationalEvent, at_ms: i64) -> Message {
    event.message(&ops.id, at(at_ms))
}

async fn the_operations_application_is_made_once_with_its_event_types(store: &dyn Store) {
    let first = ensure_operations_app(store, at(0)).await.unwrap();
    assert_eq!(first.uid.as_deref(), Some(APP_UID));
    let again = ensure_operations_app(store, at(99)).await.unwrap();
    assert_eq!(again, first, "the same application, its id kept");
    for (name, description) in EVENT_TYPES {
        let stored = store.get_event_type(name).await.unwrap().unwrap();
        assert_eq!(stored.description, description);
    }
}

/// A database made before `endpoint.enabled` existed, when `endpoint.disabled` told only of
/// hookd's own disabling, is brought up to date by the next start.
async fn a_start_brings_an_older_catalogue_up_to_date(store: &dyn Store) {
    let ops = ensure_operations_app(store, at(0)).await.unwrap();
    store.delete_event_type("endpoint.enabled").await.unwrap();
    let mut disabled = store
        .get_event_type("endpoint.disabled")
        .await
        .unwrap()
        .unwrap();
    disabled.description =
        "hookd disabled an endpoint: it answered 410 Gone, or failed for days.".into();
    store.update_event_type(&disabled).await.unwrap();
    let mut archived = store
        .get_event_type("endpoint.created")
        .await
        .unwrap()
        .unwrap();
    archived.archived = true;
    store.update_event_type(&archived).await.unwrap();

    assert_eq!(ensure_operations_app(store, at(50)).await.unwrap(), ops);
    let described = |name: &'static str| async move {
        let stored = store.get_event_type(name).await.unwrap().unwrap();
        let (_, description) = EVENT_TYPES.iter().find(|(n, _)| *n == name).unwrap();
        assert_eq!(stored.description, *description, "{name}");
        stored
    };
    assert_eq!(described("endpoint.enabled").await.created_at, at(50));
    assert_eq!(described("endpoint.disabled").await.updated_at, at(50));
    let untouched = described("endpoint.created").await;
    assert!(untouched.archived, "only the wording is hookd's to change");
    assert_eq!(untouched.updated_at, archived.updated_at);
}

async fn endpoint_changes_write_their_events_in_their_transaction(store: &dyn Store) {
    let (ops, everything, some) = operations(store).await;
    let customer = app(Some("acme"), 1);
    store.create_app(&customer).await.unwrap();
    let mut ep = endpoint(&customer, Some("primary"), None, None);
    ep.id = EndpointId::new(at(3));
    let about = EndpointRef::new(&customer, &ep);

    let created = told(&ops, OperationalEvent::EndpointCreated(about.clone()), 10);
    store
        .create_endpoint_with_events(&ep, std::slice::from_ref(&created))
        .await
        .unwrap();
    assert_eq!(
        routed_to(store, &ops, &created).await,
        Some(vec![everything.id.clone(), some.id.clone()])
    );

    // A change that is refused writes no event.
    let mut clash = endpoint(&customer, Some("primary"), None, None);
    clash.id = EndpointId::new(at(4));
    let refused = told(
        &ops,
        OperationalEvent::EndpointCreated(EndpointRef::new(&customer, &clash)),
        11,
    );
    assert!(matches!(
        store
            .create_endpoint_with_events(&clash, std::slice::from_ref(&refused))
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(routed(store, &ops, &refused).await, None);

    // Filters choose: `some` does not take endpoint.updated. A change that neither disables
    // nor enables the endpoint does not write what it would tell if it did.
    let updated = told(&ops, OperationalEvent::EndpointUpdated(about.clone()), 20);
    let not_toggled = told(&ops, OperationalEvent::EndpointEnabled(about.clone()), 20);
    let mut changed = ep.clone();
    changed.description = "changed".into();
    store
        .update_endpoint_with(&EndpointUpdate {
            endpoint: &changed,
            disabled_as_read: None,
            events: std::slice::from_ref(&updated),
            on_toggle: std::slice::from_ref(&not_toggled),
            keys: None,
        })
        .await
        .unwrap();
    assert_eq!(
        routed_to(store, &ops, &updated).await,
        Some(vec![everything.id.clone()])
    );
    assert_eq!(routed(store, &ops, &not_toggled).await, None);

    let deleted = told(&ops, OperationalEvent::EndpointDeleted(about.clone()), 30);
    store
        .delete_endpoint_with_events(&changed, std::slice::from_ref(&deleted))
        .await
        .unwrap();
    assert_eq!(
        routed_to(store, &ops, &deleted).await,
        Some(vec![everything.id.clone()])
    );

    // Gone now: neither an update nor a second delete happens, nor do their events.
    let late_update = told(&ops, OperationalEvent::EndpointUpdated(about.clone()), 40);
    let late_toggle = told(&ops, OperationalEvent::EndpointEnabled(about.clone()), 40);
    changed.disabled = true;
    assert!(matches!(
        store
            .update_endpoint_with(&EndpointUpdate {
                endpoint: &changed,
                disabled_as_read: None,
                events: std::slice::from_ref(&late_update),
                on_toggle: std::slice::from_ref(&late_toggle),
                keys: None
            })
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(routed(store, &ops, &late_update).await, None);
    assert_eq!(routed(store, &ops, &late_toggle).await, None);
    let late_delete = told(&ops, OperationalEvent::EndpointDeleted(about), 41);
    assert!(matches!(
        store
            .delete_endpoint_with_events(&changed, std::slice::from_ref(&late_delete))
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(routed(store, &ops, &late_delete).await, None);
}

async fn recorded_attempts_write_their_events_unless_the_delivery_is_gone(store: &dyn Store) {
    let (ops, everything, _) = operations(store).await;
    let (customer, eps) = app_with_endpoints(store, 2).await;
    let msg = publish(store, &customer, 10).await;
    assert_eq!(claim(store, 20, 10, 10).await.len(), 2);
    store.delete_endpoint(&eps[1]).await.unwrap();
    let exhausted = |ep: &Endpoint| {
        let attempt = attempt(&msg, ep, 30, DeliveryStatus::Fail);
        let event = OperationalEvent::Attempt(
            AttemptEvent::Exhausted,
            AttemptRef {
                app_id: customer.id.clone(),
                app_uid: None,
                endpoint_id: ep.id.clone(),
                msg_id: msg.id.clone(),
                msg_event_id: None,
                attempt: attempt.clone(),
            },
        );
        AttemptRecord {
            next: Delivery {
                message_id: msg.id.clone(),
                endpoint_id: ep.id.clone(),
                status: DeliveryStatus::Fail,
                attempt_count: 5,
                next_attempt_at: None,
                updated_at: at(30),
                ordering_key: None,
            },
            attempt,
            lease: Some(at(20 + LEASE_MS)),
            hold_until: None,
            events: vec![told(&ops, event, 30)],
        }
    };
    let (kept, lost) = (exhausted(&eps[0]), exhausted(&eps[1]));
    let recorded = store
        .record_attempts(&[kept.clone(), lost.clone()])
        .await
        .unwrap();
    assert!(matches!(recorded[0], Recorded::Written { .. }));
    assert_eq!(recorded[1], Recorded::Gone);
    assert_eq!(
        routed_to(store, &ops, &kept.events[0]).await,
        Some(vec![everything.id.clone()]),
        "written with the record"
    );
    assert_eq!(
        routed(store, &ops, &lost.events[0]).await,
        None,
        "no record, no event"
    );
    let payload = kept.events[0].payload.as_deref().unwrap();
    let body: serde_json::Value = serde_json::from_slice(payload).unwrap();
    assert_eq!(body["type"], "message.attempt.exhausted");
    assert_eq!(body["data"]["msgId"], msg.id.as_str());
}

async fn disabling_writes_its_event_once(store: &dyn Store) {
    let (ops, everything, some) = operations(store).await;
    let (customer, eps) = app_with_endpoints(store, 1).await;
    let disabled = |at_ms| {
        let event = OperationalEvent::EndpointDisabled {
            endpoint: EndpointRef::new(&customer, &eps[0]),
            fail_since: Some(at(5)),
            trigger: DisableTrigger::Automatic,
            reason: "the endpoint answered 410 Gone".into(),
        };
        told(&ops, event, at_ms)
    };
    let first = disabled(10);
    assert!(
        store
            .disable_endpoint(&eps[0].id, "gone", at(10), std::slice::from_ref(&first))
            .await
            .unwrap()
    );
    assert_eq!(
        routed_to(store, &ops, &first).await,
        Some(vec![everything.id.clone(), some.id.clone()])
    );
    // Disabled already: nothing changes, the first reason stays, no second event.
    let second = disabled(20);
    assert!(
        !store
            .disable_endpoint(&eps[0].id, "again", at(20), std::slice::from_ref(&second))
            .await
            .unwrap()
    );
    assert_eq!(routed(store, &ops, &second).await, None);
    let stored = store
        .get_endpoint(&customer.id, eps[0].id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (stored.disabled_reason.as_deref(), stored.disabled_at),
        (Some("gone"), Some(at(10)))
    );
    let ghost = EndpointId::new(at(0));
    let third = disabled(30);
    assert!(matches!(
        store
            .disable_endpoint(&ghost, "x", at(30), std::slice::from_ref(&third))
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(routed(store, &ops, &third).await, None);
}

/// An update that disables or enables an endpoint writes `on_toggle` with its other events;
/// one that leaves it as the store has it (whatever the caller read) writes only the others.
async fn an_update_tells_of_disabling_and_enabling_once(store: &dyn Store) {
    let (ops, everything, some) = operations(store).await;
    let (customer, eps) = app_with_endpoints(store, 1).await;
    let about = EndpointRef::new(&customer, &eps[0]);
    let (ops, everything) = (&ops, &everything.id);
    // Updates `ep`, telling endpoint.updated (checked to be written) and `toggle` on a
    // transition: where `toggle` was routed, `None` if it was not written.
    let update = |ep: Endpoint, toggle: OperationalEvent, at_ms: i64| {
        let about = about.clone();
        async move {
            let updated = told(ops, OperationalEvent::EndpointUpdated(about), at_ms);
            let toggled = told(ops, toggle, at_ms);
            store
                .update_endpoint_with(&EndpointUpdate {
                    endpoint: &ep,
                    disabled_as_read: None,
                    events: std::slice::from_ref(&updated),
                    on_toggle: std::slice::from_ref(&toggled),
                    keys: None,
                })
                .await
                .unwrap();
            assert_eq!(
                routed_to(store, ops, &updated).await,
                Some(vec![everything.clone()]),
                "endpoint.updated is written whatever changed"
            );
            routed_to(store, ops, &toggled).await
        }
    };
    let manual = |at_ms| OperationalEvent::EndpointDisabled {
        endpoint: about.clone(),
        fail_since: None,
        trigger: DisableTrigger::Manual,
        reason: format!("disabled at {at_ms}"),
    };
    let enabled = || OperationalEvent::EndpointEnabled(about.clone());
    let (mut off, on) = (eps[0].clone(), eps[0].clone());
    off.disabled = true;

    assert_eq!(
        update(off.clone(), manual(10), 10).await,
        Some(vec![everything.clone(), some.id.clone()]),
        "disabling is told"
    );
    assert_eq!(update(off.clone(), manual(20), 20).await, None);
    assert_eq!(
        update(on.clone(), enabled(), 30).await,
        Some(vec![everything.clone()]),
        "enabling is told; `some` does not take endpoint.enabled"
    );
    assert_eq!(update(on.clone(), enabled(), 40).await, None);

    // hookd disabled it after the caller read it enabled: the caller's disable is no
    // transition, and tells nothing more.
    assert!(
        store
            .disable_endpoint(&eps[0].id, "gone", at(50), &[])
            .await
            .unwrap()
    );
    assert_eq!(update(off, manual(60), 60).await, None);
    assert_eq!(
        update(on, enabled(), 70).await,
        Some(vec![everything.clone()])
    );
}

behaviour!(
    the_operations_application_is_made_once_with_its_event_types,
    a_start_brings_an_older_catalogue_up_to_date,
    endpoint_changes_write_their_events_in_their_transaction,
    recorded_attempts_write_their_events_unless_the_delivery_is_gone,
    disabling_writes_its_event_once,
    an_update_tells_of_disabling_and_enabling_once,
);
