//! PostgreSQL-specific guarantees of the schema: processes migrating at once, function
//! definitions kept at the newest, both URL schemes, byte-order ids whatever the server's
//! collation, and test-database cleanup. Skipped like the suite's `postgres::` cases when
//! `HOOKD_TEST_POSTGRES_URL` is unset.

mod pg_fixtures;

use hookd_core::model::{Application, Attempt, Delivery, DeliveryStatus, Endpoint, TriggerType};
use hookd_core::{AttemptId, Timestamp};
use hookd_store::postgres::PgStore;
use hookd_store::prelude::*;
use hookd_store::testing::{POSTGRES_URL_VAR, fresh_postgres, fresh_postgres_with};
use hookd_store::{AttemptRecord, ClaimedDelivery, Cursor, PageRequest};
use sqlx::Connection;

use pg_fixtures::*;

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
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres"))
        .unwrap()
        .count();
    assert_eq!(
        migrations,
        i64::try_from(files).unwrap(),
        "each migration once"
    );
    assert_eq!(
        tables,
        [
            "_sqlx_migrations",
            "api_tokens",
            "applications",
            "attempts",
            "background_tasks",
            "deliveries",
            "endpoint_key_digests",
            "endpoints",
            "event_types",
            "function_definitions",
            "idempotent_responses",
            "ingest_rejections",
            "ingest_requests",
            "ingest_sources",
            "messages",
            "notice_cursor",
            "outbox",
            "outbox_relayed",
            "poller_consumers",
            "spent_event_ids",
        ]
    );
}

#[tokio::test]
async fn a_process_starts_on_a_schema_a_newer_version_migrated() {
    let Some((url, _db)) = fresh_postgres("postgres_only::newer_schema").await else {
        return;
    };
    let newer = PgStore::connect(&url).await.unwrap();
    // What a newer hookd leaves behind in a rolling upgrade: a migration this one lacks.
    sqlx::query(
        "INSERT INTO hookd._sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (99999, 'from a newer hookd', true, '\\x00', 0)",
    )
    .execute(newer.pool())
    .await
    .unwrap();

    let older = PgStore::connect(&url)
        .await
        .expect("an older process ignores migrations newer than itself");
    assert!(!older.has_admin_token().await.unwrap());
}

/// `outbox_notify`'s definition in the database, and the number recorded for it.
async fn outbox_notify_in_place(store: &PgStore) -> (String, i64) {
    let sql: String =
        sqlx::query_scalar("SELECT pg_get_functiondef('hookd.outbox_notify'::regproc)")
            .fetch_one(store.pool())
            .await
            .unwrap();
    let number = sqlx::query_scalar(
        "SELECT definition FROM hookd.function_definitions WHERE name = 'outbox_notify'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    (sql, number)
}

/// Replaces `outbox_notify` by a marked body, recorded as definition `number`.
async fn put_marked_outbox_notify(store: &PgStore, number: i64) {
    sqlx::raw_sql(
        "CREATE OR REPLACE FUNCTION hookd.outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RETURN NULL; END -- marked
         $$;",
    )
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(
        "UPDATE hookd.function_definitions SET definition = $1 WHERE name = 'outbox_notify'",
    )
    .bind(number)
    .execute(store.pool())
    .await
    .unwrap();
}

#[tokio::test]
async fn connecting_puts_back_a_function_whose_definition_in_place_is_older() {
    let Some((url, _db)) = fresh_postgres("postgres_only::functions_older").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let (current, number) = outbox_notify_in_place(&store).await;
    assert!(current.contains("pg_notify"), "{current}");
    put_marked_outbox_notify(&store, number - 1).await;

    let reconnected = PgStore::connect(&url).await.unwrap();
    assert_eq!(
        outbox_notify_in_place(&reconnected).await,
        (current, number)
    );
}

#[tokio::test]
async fn an_older_process_keeps_a_newer_function_definition() {
    let Some((url, _db)) = fresh_postgres("postgres_only::functions_newer").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let (_, number) = outbox_notify_in_place(&store).await;
    // What a newer hookd leaves behind in a rolling upgrade: a later definition.
    put_marked_outbox_notify(&store, number + 1).await;

    let older = PgStore::connect(&url).await.unwrap();
    let (in_place, kept) = outbox_notify_in_place(&older).await;
    assert!(in_place.contains("-- marked"), "{in_place}");
    assert_eq!(kept, number + 1);
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

/// Attempts reference no table (migration 0029), yet none outlives its delivery: they go with
/// their endpoint, and with their application's messages.
#[tokio::test]
async fn attempts_are_deleted_with_their_deliveries() {
    let Some((url, _db)) = fresh_postgres("postgres_only::attempts_follow").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let owner = app("app_attempts_follow");
    let endpoints: Vec<Endpoint> = (0..2).map(|i| endpoint_of(&owner, i, None)).collect();
    queue(&store, &owner, &endpoints, 3).await;
    let claimed = store.claim_due(&claim_at(1_000, 10)).await.unwrap();
    assert_eq!(claimed.len(), 6);
    let answered: Vec<AttemptRecord> = claimed.iter().map(delivered).collect();
    store.record_attempts(&answered).await.unwrap();
    assert_eq!(rows_to(&store, "attempts", &endpoints[0]).await, 3);
    store.delete_endpoint(&endpoints[0]).await.unwrap();
    assert_eq!(
        rows_to(&store, "attempts", &endpoints[0]).await,
        0,
        "gone with the endpoint"
    );
    assert_eq!(
        rows_to(&store, "attempts", &endpoints[1]).await,
        3,
        "the other's kept"
    );
    store.delete_app(&owner.id).await.unwrap();
    assert_eq!(
        rows_to(&store, "attempts", &endpoints[1]).await,
        0,
        "gone with the messages"
    );
}

/// Messages and deliveries reference no table either (migration 0030): their writers lock the
/// parents, and deleting a parent takes its children, even one a writer committed while the
/// delete waited for that lock.
#[tokio::test]
async fn a_parent_deleted_while_written_under_takes_what_was_written() {
    let Some((url, _db)) = fresh_postgres("postgres_only::parents_locked").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let owner = app("app_parents_locked");
    let endpoints: Vec<Endpoint> = (0..2).map(|i| endpoint_of(&owner, i, None)).collect();
    queue(&store, &owner, &endpoints, 2).await;
    let doomed = endpoints[0].id.clone();
    // A writer locks the endpoint as every writer does, then writes one more delivery to it.
    let mut writer = store.pool().begin().await.unwrap();
    let written = [
        "SELECT lock_parents(NULL, NULL, ARRAY['{ep}'])",
        "INSERT INTO messages (id, app_id, event_type, created_at)
         VALUES ('msg_late', 'app_parents_locked', 't', 0)",
        "INSERT INTO deliveries (message_id, endpoint_id, status, attempt_count, updated_at)
         VALUES ('msg_late', '{ep}', 1, 0, 0)",
    ];
    for sql in written {
        let sql = sql.replace("{ep}", doomed.as_str());
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *writer)
            .await
            .unwrap();
    }
    let deleting = tokio::spawn({
        let (store, doomed) = (store.clone(), endpoints[0].clone());
        async move { store.delete_endpoint(&doomed).await }
    });
    while !deleting.is_finished() && !a_backend_waits_for_a_row_lock(&store).await {
        tokio::task::yield_now().await;
    }
    writer.commit().await.unwrap();
    deleting.await.unwrap().unwrap();
    assert_eq!(
        rows_to(&store, "deliveries", &endpoints[0]).await,
        0,
        "none left behind"
    );
    assert_eq!(
        rows_to(&store, "deliveries", &endpoints[1]).await,
        2,
        "the other's kept"
    );
    store.delete_app(&owner.id).await.unwrap();
    let messages: i64 = sqlx::query_scalar("SELECT count(*) FROM hookd.messages")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(messages, 0, "gone with their application");
    assert_eq!(rows_to(&store, "deliveries", &endpoints[1]).await, 0);
    let missing = sqlx::query("SELECT hookd.lock_parents(ARRAY['app_gone'], NULL, NULL)")
        .execute(store.pool())
        .await
        .unwrap_err();
    let missing = missing.as_database_error().unwrap();
    assert!(missing.is_foreign_key_violation(), "{missing}");
    assert_eq!(missing.constraint(), Some("messages_app_id_fkey"));
}

/// Whether a backend of the store's database waits for a row lock.
async fn a_backend_waits_for_a_row_lock(store: &PgStore) -> bool {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT FROM pg_stat_activity
                        WHERE datname = current_database() AND wait_event_type = 'Lock')",
    )
    .fetch_one(store.pool())
    .await
    .unwrap()
}

/// How many rows of `table` (`attempts`, `deliveries`) to `endpoint` the database holds.
async fn rows_to(store: &PgStore, table: &str, endpoint: &Endpoint) -> i64 {
    let count = format!("SELECT count(*) FROM hookd.{table} WHERE endpoint_id = $1");
    sqlx::query_scalar(sqlx::AssertSqlSafe(count))
        .bind(endpoint.id.as_str())
        .fetch_one(store.pool())
        .await
        .unwrap()
}

/// A 200 for `claimed`, a second after its claim.
fn delivered(claimed: &ClaimedDelivery) -> AttemptRecord {
    let at = Timestamp::from_millis(2_000);
    AttemptRecord {
        attempt: Attempt {
            id: AttemptId::new(at),
            message_id: claimed.message.id.clone(),
            endpoint_id: claimed.delivery.endpoint_id.clone(),
            url: "http://127.0.0.1:9/".into(),
            response_status_code: 200,
            response: String::new(),
            response_head: "HTTP/1.1 200 OK\r\n".into(),
            response_duration_ms: 3,
            status: DeliveryStatus::Success,
            trigger_type: TriggerType::Scheduled,
            created_at: at,
        },
        next: Delivery {
            status: DeliveryStatus::Success,
            attempt_count: 1,
            next_attempt_at: None,
            updated_at: at,
            ..claimed.delivery.clone()
        },
        lease: claimed.delivery.next_attempt_at,
        hold_until: None,
        events: Vec::new(),
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
