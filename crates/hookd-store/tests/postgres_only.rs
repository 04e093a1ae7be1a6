//! PostgreSQL-specific guarantees the shared behavioural suite cannot express: concurrent
//! migration, byte-order ids whatever the server's collation, and test-database cleanup.
//! Skipped like the suite's `postgres::` cases when `HOOKD_TEST_POSTGRES_URL` is unset.

use std::collections::BTreeMap;

use hookd_core::model::Application;
use hookd_core::{AppId, Timestamp};
use hookd_store::postgres::PgStore;
use hookd_store::testing::{POSTGRES_URL_VAR, fresh_postgres, fresh_postgres_with};
use hookd_store::{Cursor, PageRequest, Store};
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
    assert_eq!(migrations, 1);
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
