//! PostgreSQL-specific guarantees the shared behavioural suite cannot express: concurrent
//! migration, concurrent claimers, byte-order ids whatever the server's collation, and
//! test-database cleanup.
//! Skipped like the suite's `postgres::` cases when `HOOKD_TEST_POSTGRES_URL` is unset.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use hookd_core::model::{Application, Endpoint, Message};
use hookd_core::{AppId, EndpointId, MessageId, Timestamp};
use hookd_store::postgres::PgStore;
use hookd_store::prelude::*;
use hookd_store::testing::{POSTGRES_URL_VAR, fresh_postgres, fresh_postgres_with};
use hookd_store::{ClaimRequest, Cursor, PageRequest};
use sqlx::Connection;

fn app(id: &str) -> Application {
    Application {
        id: AppId::from_stored(id.to_owned()),
        uid: None,
        name: id.to_owned(),
        metadata: BTreeMap::new(),
        throttle_rate: None,
        created_at: Timestamp::from_millis(0),
        updated_at: Timestamp::from_millis(0),
    }
}

#[tokio::test]
async fn processes_connecting_at_once_migrate_once() {
    let Some((url, _db)) = fresh_postgres("postgres_only::concurrent_connects").await else {
        return;
    };
    let connects = (0..4).map(|_| PgStore::connect(&url));
    let stores = futures::future::join_all(connects).await;
    let stores: Vec<PgStore> = stores.into_iter().map(Result::unwrap).collect();
    let (migrations, tables): (i64, Vec<String>) = {
        let pool = stores[0].pool();
        let applied = sqlx::query_scalar("SELECT count(*) FROM hookd._sqlx_migrations")
            .fetch_one(pool)
            .await
            .unwrap();
        let tables = sqlx::query_scalar(
            "SELECT table_name::text FROM information_schema.tables
             WHERE table_schema = 'hookd' ORDER BY table_name",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        (applied, tables)
    };
    // Each migration once, however many there are.
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres"))
        .unwrap()
        .count();
    assert_eq!(migrations, files as i64);
    assert_eq!(
        tables,
        [
            "_sqlx_migrations",
            "api_tokens",
            "applications",
            "attempts",
            "deliveries",
            "endpoints",
            "event_types",
            "idempotent_responses",
            "messages",
        ]
    );
}

#[tokio::test]
async fn open_accepts_both_url_schemes() {
    let Some((url, _db)) = fresh_postgres("postgres_only::open").await else {
        return;
    };
    let other = match url.strip_prefix("postgres://") {
        Some(rest) => format!("postgresql://{rest}"),
        None => url.replacen("postgresql://", "postgres://", 1),
    };
    for url in [&url, &other] {
        let store = hookd_store::open(url).await.unwrap();
        assert!(!store.has_admin_token().await.unwrap());
    }
}

#[tokio::test]
async fn ids_page_in_byte_order_whatever_the_server_collation() {
    // An ICU en-US default collation sorts "app_a" before "app_B"; ids need ASCII order.
    let options = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'";
    let Some((url, _db)) = fresh_postgres_with("postgres_only::collation", options).await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    for id in ["app_a", "app_B", "app_0"] {
        store.create_app(&app(id)).await.unwrap();
    }
    let ids = |page: hookd_store::Page<Application>| {
        page.items
            .into_iter()
            .map(|a| a.id.to_string())
            .collect::<Vec<_>>()
    };
    let all = PageRequest {
        limit: 10,
        cursor: None,
    };
    assert_eq!(
        ids(store.list_apps(&all).await.unwrap()),
        ["app_0", "app_B", "app_a"]
    );
    let after = PageRequest {
        limit: 10,
        cursor: Some(Cursor::After("app_B".into())),
    };
    assert_eq!(ids(store.list_apps(&after).await.unwrap()), ["app_a"]);
}

#[tokio::test]
async fn a_panicking_test_still_drops_its_database() {
    let Some((url, guard)) = fresh_postgres("postgres_only::panic_cleanup").await else {
        return;
    };
    let name = guard.name().to_owned();
    let task = tokio::spawn(async move {
        let _guard = guard;
        // Open connections too: the drop must end them.
        let store = PgStore::connect(&url).await.unwrap();
        store.create_app(&app("app_x")).await.unwrap();
        panic!("failing on purpose");
    });
    assert!(task.await.unwrap_err().is_panic());
    let server = std::env::var(POSTGRES_URL_VAR).unwrap();
    let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_database WHERE datname = $1")
        .bind(&name)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(left, 0, "{name} survived its guard");
}

#[tokio::test]
async fn concurrent_claimers_never_get_the_same_delivery() {
    let Some((url, _db)) = fresh_postgres("postgres_only::concurrent_claims").await else {
        return;
    };
    let setup = PgStore::connect(&url).await.unwrap();
    let owner = app("app_claims");
    setup.create_app(&owner).await.unwrap();
    // 20 endpoints × 100 messages: 2,000 due deliveries.
    for i in 0..20 {
        let created = Timestamp::from_millis(i);
        let endpoint = Endpoint {
            id: EndpointId::new(created),
            app_id: owner.id.clone(),
            uid: None,
            url: format!("https://example.com/hook/{i}"),
            description: String::new(),
            event_types: None,
            channels: None,
            disabled: false,
            disabled_reason: None,
            disabled_at: None,
            throttle_rate: None,
            timeout_secs: None,
            metadata: BTreeMap::new(),
            headers: BTreeMap::new(),
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            created_at: created,
            updated_at: created,
        };
        setup.create_endpoint(&endpoint).await.unwrap();
    }
    for i in 0..100 {
        let created = Timestamp::from_millis(i);
        let message = Message {
            id: MessageId::new(created),
            app_id: owner.id.clone(),
            event_type: "order.shipped".into(),
            event_id: None,
            channels: None,
            payload: Some(b"{}".to_vec()),
            created_at: created,
        };
        assert_eq!(setup.create_message(&message).await.unwrap().deliveries, 20);
    }
    // Four claimers with their own pools, as four processes would be.
    let mut claimers = Vec::new();
    for _ in 0..4 {
        let store = PgStore::connect(&url).await.unwrap();
        claimers.push(tokio::spawn(async move {
            let request = ClaimRequest {
                now: Timestamp::from_millis(1_000),
                lease_until: Timestamp::from_millis(1_000_000),
                limit: 25,
                per_endpoint: 3,
                skip_endpoints: Vec::new(),
            };
            let mut mine = Vec::new();
            for _ in 0..10_000 {
                let claimed = store.claim_due(&request).await.unwrap();
                if claimed.is_empty() {
                    // Empty either because everything is claimed, or because the others hold
                    // every candidate right now.
                    let pending: i64 =
                        sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE status = 1")
                            .fetch_one(store.pool())
                            .await
                            .unwrap();
                    if pending == 0 {
                        return mine;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                assert!(claimed.len() <= 25);
                mine.extend(
                    claimed
                        .into_iter()
                        .map(|c| (c.delivery.message_id, c.delivery.endpoint_id)),
                );
            }
            panic!("the claimer never saw the queue empty");
        }));
    }
    let mut all = Vec::new();
    for claimer in claimers {
        all.extend(claimer.await.unwrap());
    }
    let distinct: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(distinct.len(), all.len(), "a delivery was claimed twice");
    assert_eq!(all.len(), 2_000);
    let sending: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE status = 3")
        .fetch_one(setup.pool())
        .await
        .unwrap();
    assert_eq!(sending, 2_000);
}
