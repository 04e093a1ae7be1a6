//! Applications and the event catalog: created, found by id or uid, paged, deleted with everything they own.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use harness::fixtures::{app, at, endpoint, first_page, message};
use hookd_core::model::{Application, EventType};
use hookd_store::{Cursor, NewMessage, PageRequest, Store, StoreError};

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
    store.publish(NewMessage::new(msg.clone())).await.unwrap();
    let echo = message(&first, "a", Some(msg.id.as_str()), None, 3);
    store.publish(NewMessage::new(echo.clone())).await.unwrap();
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

async fn deleting_an_app_removes_everything_it_owns(store: &dyn Store) {
    let a = app(Some("gone"), 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    let msg = message(&a, "order.shipped", None, None, 10);
    store.publish(NewMessage::new(msg.clone())).await.unwrap();
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

async fn archived_event_types_are_listed_only_on_request(store: &dyn Store) {
    let event_type = |name: &str, archived: bool| EventType {
        name: name.into(),
        description: format!("{name} happened"),
        schemas: Some(serde_json::json!({"1": {"type": "object"}})),
        archived,
        deprecated: false,
        feature_flag: None,
        group_name: Some("orders".into()),
        feature_flags: Some(vec!["beta".into(), "eu".into()]),
        envelope: false,
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
    updated.group_name = Some("shipping".into());
    updated.feature_flags = None;
    store.update_event_type(&updated).await.unwrap();
    assert_eq!(
        store.get_event_type("order.shipped").await.unwrap(),
        Some(updated)
    );
    store.delete_event_type("order.old").await.unwrap();
    assert_eq!(store.get_event_type("order.old").await.unwrap(), None);
}

behaviour!(
    apps_round_trip_and_look_up_by_id_or_uid,
    an_id_wins_over_another_rows_equal_uid,
    duplicate_app_uid_is_a_conflict,
    missing_records_are_not_found,
    app_pages_go_forward_and_back,
    archived_event_types_are_listed_only_on_request,
    deleting_an_app_removes_everything_it_owns,
);
