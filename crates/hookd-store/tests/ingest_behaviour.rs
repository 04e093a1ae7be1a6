//! The `IngestStore` contract, on every `Store` implementation: a source is found by id, uid
//! and token (its previous token only until its overlap ends), re-sealing is a
//! compare-and-swap, a taken uid is a conflict, the sources' own applications stay out of the
//! application list, deleting the application deletes its source, accepted requests list
//! newest first and go with their message, and only the newest rejections are kept.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use std::collections::BTreeMap;

use harness::fixtures::{app, at, first_page, message};
use hookd_core::model::Application;
use hookd_core::{RejectionId, SourceId};
use hookd_store::store::ingest::{REJECTIONS_KEPT, internal_app_uid};
use hookd_store::{IngestRejection, IngestRequest, IngestSource, NewMessage, Store, StoreError};

/// A source created at `created` owning a new application (written first, as the API does).
async fn source(store: &dyn Store, uid: Option<&str>, created: i64) -> (IngestSource, Application) {
    let id = SourceId::new(at(created));
    let mut owned = app(Some(&internal_app_uid(&id)), created);
    owned.name = "stripe".into();
    store.create_app(&owned).await.unwrap();
    let source = IngestSource {
        id,
        uid: uid.map(str::to_owned),
        name: "stripe".into(),
        kind: "stripe".into(),
        sealed: "sealed-config".into(),
        metadata: BTreeMap::from([("team".to_owned(), "billing".to_owned())]),
        app_id: owned.id.clone(),
        token_hash: format!("hash-{created}"),
        previous_token_hash: None,
        previous_until: None,
        max_body_bytes: Some(1024),
        rate_limit: Some(5),
        ordering_pointer: Some("/data/object/customer".into()),
        created_at: at(created),
        updated_at: at(created),
    };
    store.create_source(&source).await.unwrap();
    (source, owned)
}

async fn a_source_is_found_by_id_uid_token_and_application(store: &dyn Store) {
    let (src, owned) = source(store, Some("payments"), 0).await;
    let by_id = store.get_source(src.id.as_str()).await.unwrap();
    assert_eq!(by_id.as_ref(), Some(&src), "read back as written");
    let by_uid = store.get_source("payments").await.unwrap();
    assert_eq!(by_uid.map(|s| s.id), Some(src.id.clone()));
    let by_token = store.source_by_token("hash-0", at(0)).await.unwrap();
    assert_eq!(by_token.map(|s| s.id), Some(src.id.clone()));
    let of_app = store.source_of_app(&owned.id).await.unwrap();
    assert_eq!(of_app.map(|s| s.id), Some(src.id));
    assert_eq!(store.source_by_token("hash-9", at(0)).await.unwrap(), None);
    assert_eq!(store.get_source("missing").await.unwrap(), None);
}

async fn a_rotated_token_works_until_its_overlap_ends(store: &dyn Store) {
    let (mut src, _) = source(store, None, 0).await;
    src.previous_token_hash = Some(src.token_hash.clone());
    src.previous_until = Some(at(10_000));
    src.token_hash = "hash-new".into();
    src.name = "stripe live".into();
    store.update_source(&src).await.unwrap();
    let found = |hash: &'static str, now: i64| async move {
        store
            .source_by_token(hash, at(now))
            .await
            .unwrap()
            .map(|s| s.name)
    };
    assert_eq!(found("hash-new", 0).await.as_deref(), Some("stripe live"));
    assert_eq!(found("hash-0", 9_999).await.as_deref(), Some("stripe live"));
    assert_eq!(found("hash-0", 10_000).await, None, "the overlap is over");
}

async fn re_sealing_replaces_only_what_was_read(store: &dyn Store) {
    let (src, _) = source(store, None, 0).await;
    let stale = store.replace_source_sealed(&src.id, "other", "new").await;
    assert!(!stale.unwrap(), "changed meanwhile: left alone");
    assert!(
        store
            .replace_source_sealed(&src.id, "sealed-config", "resealed")
            .await
            .unwrap()
    );
    let read = store.get_source(src.id.as_str()).await.unwrap().unwrap();
    assert_eq!(read.sealed, "resealed");
}

async fn a_taken_uid_is_a_conflict(store: &dyn Store) {
    source(store, Some("payments"), 0).await;
    let id = SourceId::new(at(5));
    let owned = app(Some(&internal_app_uid(&id)), 5);
    store.create_app(&owned).await.unwrap();
    let mut twin = source_like(&id, &owned);
    twin.uid = Some("payments".into());
    let refused = store.create_source(&twin).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
}

/// A source like [`source`]'s for an application written already.
fn source_like(id: &SourceId, owned: &Application) -> IngestSource {
    IngestSource {
        id: id.clone(),
        uid: None,
        name: "github".into(),
        kind: "github".into(),
        sealed: "sealed".into(),
        metadata: BTreeMap::new(),
        app_id: owned.id.clone(),
        token_hash: format!("hash-{id}"),
        previous_token_hash: None,
        previous_until: None,
        max_body_bytes: None,
        rate_limit: None,
        ordering_pointer: None,
        created_at: owned.created_at,
        updated_at: owned.created_at,
    }
}

async fn sources_list_in_order_and_their_applications_stay_hidden(store: &dyn Store) {
    let customer = app(Some("customer"), 0);
    store.create_app(&customer).await.unwrap();
    let (first, _) = source(store, None, 1).await;
    let (second, _) = source(store, None, 2).await;
    let sources = store.list_sources(&first_page(10)).await.unwrap();
    let ids: Vec<_> = sources.items.iter().map(|s| s.id.clone()).collect();
    assert_eq!(ids, [first.id, second.id]);
    let apps = store.list_apps(&first_page(10)).await.unwrap();
    let uids: Vec<_> = apps.items.iter().map(|a| a.uid.clone()).collect();
    assert_eq!(uids, [Some("customer".to_owned())], "only the customer's");
}

async fn deleting_the_application_deletes_its_source(store: &dyn Store) {
    let (src, owned) = source(store, Some("payments"), 0).await;
    store.delete_app(&owned.id).await.unwrap();
    assert_eq!(store.get_source(src.id.as_str()).await.unwrap(), None);
    assert_eq!(store.source_by_token("hash-0", at(0)).await.unwrap(), None);
}

async fn accepted_requests_list_newest_first_and_go_with_their_message(store: &dyn Store) {
    let (src, owned) = source(store, None, 0).await;
    let mut requests = Vec::new();
    for n in 1..=3 {
        let msg = message(
            &owned,
            "invoice.paid",
            Some(&format!("evt_{n}")),
            None,
            n * 10,
        );
        store.publish(NewMessage::new(msg.clone())).await.unwrap();
        let request = IngestRequest {
            message_id: msg.id.clone(),
            source_id: src.id.clone(),
            event_type: "invoice.paid".into(),
            event_id: Some(format!("evt_{n}")),
            headers: BTreeMap::from([("stripe-signature".to_owned(), format!("t={n}"))]),
            remote_addr: Some("127.0.0.1".into()),
            received_at: at(n * 10),
        };
        store.record_ingest_request(&request).await.unwrap();
        requests.push(request);
    }
    let listed = store
        .list_ingest_requests(&src.id, &first_page(2))
        .await
        .unwrap();
    assert_eq!(listed.items, [requests[2].clone(), requests[1].clone()]);
    assert!(listed.has_more);
    store.delete_app(&owned.id).await.unwrap();
    let gone = store.list_ingest_requests(&src.id, &first_page(10)).await;
    assert!(gone.unwrap().items.is_empty(), "gone with the messages");
}

async fn only_the_newest_rejections_are_kept(store: &dyn Store) {
    let (src, _) = source(store, None, 0).await;
    let total = REJECTIONS_KEPT as i64 + 5;
    for n in 0..total {
        let rejection = IngestRejection {
            id: RejectionId::new(at(100 + n)),
            source_id: src.id.clone(),
            reason: "signature".into(),
            detail: format!("attempt {n}"),
            header_names: vec!["stripe-signature".into(), "content-type".into()],
            remote_addr: None,
            received_at: at(100 + n),
        };
        store.record_rejection(&rejection).await.unwrap();
    }
    let mut kept = Vec::new();
    let mut page = first_page(250);
    loop {
        let listed = store.list_rejections(&src.id, &page).await.unwrap();
        kept.extend(listed.items.iter().map(|r| r.detail.clone()));
        match (listed.has_more, listed.items.last()) {
            (true, Some(last)) => {
                page.cursor = Some(hookd_store::Cursor::After(last.id.to_string()))
            }
            _ => break,
        }
    }
    assert_eq!(kept.len(), REJECTIONS_KEPT as usize);
    assert_eq!(kept[0], format!("attempt {}", total - 1), "newest first");
    assert_eq!(
        kept.last().unwrap(),
        "attempt 5",
        "the oldest five are gone"
    );
}

behaviour!(
    a_source_is_found_by_id_uid_token_and_application,
    a_rotated_token_works_until_its_overlap_ends,
    a_taken_uid_is_a_conflict,
    re_sealing_replaces_only_what_was_read,
    sources_list_in_order_and_their_applications_stay_hidden,
    deleting_the_application_deletes_its_source,
    accepted_requests_list_newest_first_and_go_with_their_message,
    only_the_newest_rejections_are_kept,
);
