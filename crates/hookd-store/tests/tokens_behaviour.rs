//! API tokens: found by their hash, revoked but kept on record.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use harness::fixtures::{app, at};
use hookd_store::{ApiToken, Cursor, PageRequest, Store, StoreError};

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
        endpoint_id: None,
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

behaviour!(
    tokens_are_found_by_hash,
    revoked_tokens_stay_listed_and_stop_counting_as_admin,
);
