//! PostgreSQL-specific guarantees the shared behavioural suite cannot express: concurrent
//! migration, concurrent claimers, an endpoint update racing hookd's own disabling,
//! byte-order ids whatever the server's collation, test-database cleanup, publishing in
//! batches (one transaction for concurrent publishes, failing fast while the database is
//! away, one publish task per pool that ends with the store), and new deliveries handed to the
//! publishing process's engine within the room every process leaves.
//! Skipped like the suite's `postgres::` cases when `HOOKD_TEST_POSTGRES_URL` is unset.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hookd_core::model::{
    Application, Attempt, Delivery, DeliveryStatus, Endpoint, Message, SealedKeys, TriggerType,
};
use hookd_core::operations::{DisableTrigger, EndpointRef, OperationalEvent};
use hookd_core::{AppId, AttemptId, EndpointId, MessageId, Timestamp};
use hookd_store::postgres::PgStore;
use hookd_store::prelude::*;
use hookd_store::testing::{POSTGRES_URL_VAR, fresh_postgres, fresh_postgres_with};
use hookd_store::{
    AttemptRecord, ClaimRequest, ClaimedDelivery, Cursor, EndpointUpdate, Handoff, HandoffMode,
    NewMessage, PageRequest, Reserved, StoreError, ensure_operations_app,
};
use sqlx::{AssertSqlSafe, Connection};

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
            "endpoints",
            "event_types",
            "function_definitions",
            "idempotent_responses",
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
    // 20 endpoints × 100 messages: 2,000 due deliveries.
    let endpoints: Vec<Endpoint> = (0..20).map(|i| endpoint_of(&owner, i, None)).collect();
    queue(&setup, &owner, &endpoints, 100).await;
    // Four claimers with their own pools, as four processes would be.
    let mut claimers = Vec::new();
    for _ in 0..4 {
        let store = PgStore::connect(&url).await.unwrap();
        claimers.push(tokio::spawn(async move {
            let request = ClaimRequest {
                now: Timestamp::from_millis(1_000),
                lease_until: Timestamp::from_millis(1_000_000),
                limit: 25,
                // A cap no endpoint reaches: this test is about claimers racing for rows (the
                // cluster-wide caps have their own test below).
                per_endpoint: 100,
                rooms: Default::default(),
                ceiling: 100,
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

/// An endpoint of `owner` created at `created` ms, limited to `rate` attempts a second.
fn endpoint_of(owner: &Application, created: i64, rate: Option<u16>) -> Endpoint {
    let created = Timestamp::from_millis(created);
    Endpoint {
        id: EndpointId::new(created),
        app_id: owner.id.clone(),
        uid: None,
        url: "https://example.com/hook".into(),
        description: String::new(),
        event_types: None,
        channels: None,
        disabled: false,
        disabled_reason: None,
        disabled_at: None,
        throttle_rate: rate,
        timeout_secs: None,
        max_concurrency: None,
        ordering: Default::default(),
        metadata: BTreeMap::new(),
        headers: BTreeMap::new(),
        keys: SealedKeys::from_stored("hk1:test:sealed".into()),
        created_at: created,
        updated_at: created,
        destination: Default::default(),
        batch_size: 1,
        max_wait_secs: 0,
    }
}

/// A message of `owner` created at `created` ms.
/// Creates `owner` and its `endpoints`, then `messages` messages (created at 0, 1, … ms), so
/// that every endpoint has that many deliveries due.
async fn queue(store: &PgStore, owner: &Application, endpoints: &[Endpoint], messages: i64) {
    store.create_app(owner).await.unwrap();
    for endpoint in endpoints {
        store.create_endpoint(endpoint).await.unwrap();
    }
    for i in 0..messages {
        let created = store
            .publish(NewMessage::new(message_of(owner, i)))
            .await
            .unwrap();
        assert_eq!(created.deliveries, endpoints.len());
    }
}

fn message_of(owner: &Application, created: i64) -> Message {
    let created = Timestamp::from_millis(created);
    Message {
        id: MessageId::new(created),
        app_id: owner.id.clone(),
        event_type: "order.shipped".into(),
        event_id: None,
        channels: None,
        ordering_key: None,
        tags: None,
        deliver_at: None,
        payload: Some(b"{}".to_vec()),
        created_at: created,
    }
}

/// A claim at `now` (unix ms) of up to 100 deliveries, `per_endpoint` at most each, leased
/// for a minute.
fn claim_at(now: i64, per_endpoint: usize) -> ClaimRequest {
    ClaimRequest {
        now: Timestamp::from_millis(now),
        lease_until: Timestamp::from_millis(now + 60_000),
        limit: 100,
        per_endpoint,
        rooms: Default::default(),
        ceiling: per_endpoint,
    }
}

/// Four stores on `url` with their own pools, as four processes would be.
async fn four_claimers(url: &str) -> Vec<PgStore> {
    futures::future::join_all((0..4).map(|_| PgStore::connect(url)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

/// What four claimers (own pools, as four processes) claim at once at `now`, per endpoint.
async fn claim_everywhere(
    claimers: &[PgStore],
    now: i64,
    per_endpoint: usize,
) -> BTreeMap<String, usize> {
    let request = claim_at(now, per_endpoint);
    let claims = claimers.iter().map(|store| store.claim_due(&request));
    let mut counts = BTreeMap::new();
    for claimed in futures::future::join_all(claims).await {
        for c in claimed.unwrap() {
            *counts.entry(c.endpoint.id.to_string()).or_default() += 1;
        }
    }
    counts
}

#[tokio::test]
async fn endpoint_limits_hold_across_processes() {
    let Some((url, _db)) = fresh_postgres("postgres_only::cluster_limits").await else {
        return;
    };
    let setup = PgStore::connect(&url).await.unwrap();
    let owner = app("app_limits");
    let capped = endpoint_of(&owner, 1, None);
    let throttled = endpoint_of(&owner, 2, Some(2));
    queue(&setup, &owner, &[capped.clone(), throttled.clone()], 50).await;
    let claimers = four_claimers(&url).await;
    let (capped, throttled) = (capped.id.to_string(), throttled.id.to_string());

    // Concurrency 3 in all, whichever process claims; the rate-limited endpoint gives one
    // second of its rate (2) to the first claim.
    let first = claim_everywhere(&claimers, 1_000, 3).await;
    assert_eq!(first.get(&capped), Some(&3), "{first:?}");
    assert_eq!(first.get(&throttled), Some(&2), "{first:?}");
    // Nothing more while those are in flight and inside the rate window.
    let busy = claim_everywhere(&claimers, 1_999, 3).await;
    assert!(busy.is_empty(), "{busy:?}");
    // The rate window has passed; the throttled endpoint has room for one more under its cap.
    let next_window = claim_everywhere(&claimers, 2_000, 3).await;
    assert_eq!(next_window.get(&throttled), Some(&1), "{next_window:?}");
    assert_eq!(next_window.get(&capped), None, "{next_window:?}");
    // Leases that ran out (a process died) no longer count: the cap is free again.
    let after_leases = claim_everywhere(&claimers, 61_001, 3).await;
    assert_eq!(after_leases.get(&capped), Some(&3), "{after_leases:?}");
}

/// An endpoint that answered 429 (or 502–504) gets no new work from any process until the
/// time its answer asked for, though its cap has room and its deliveries are due.
#[tokio::test]
async fn an_endpoint_that_asked_to_slow_down_is_held_for_every_process() {
    let Some((url, _db)) = fresh_postgres("postgres_only::slow_down").await else {
        return;
    };
    let setup = PgStore::connect(&url).await.unwrap();
    let owner = app("app_slow_down");
    let endpoint = endpoint_of(&owner, 1, None);
    queue(&setup, &owner, std::slice::from_ref(&endpoint), 10).await;
    let told = setup
        .claim_due(&claim_at(1_000, 1))
        .await
        .unwrap()
        .remove(0);
    let at = Timestamp::from_millis;
    let answered = AttemptRecord {
        attempt: Attempt {
            id: AttemptId::new(at(1_100)),
            message_id: told.message.id.clone(),
            endpoint_id: endpoint.id.clone(),
            url: endpoint.url.clone(),
            response_status_code: 429,
            response: String::new(),
            response_head: "HTTP/1.1 429 Too Many Requests\r\nretry-after: 5\r\n".into(),
            response_duration_ms: 3,
            status: DeliveryStatus::Fail,
            trigger_type: TriggerType::Scheduled,
            created_at: at(1_100),
        },
        next: Delivery {
            status: DeliveryStatus::Pending,
            attempt_count: 1,
            next_attempt_at: Some(at(6_100)),
            updated_at: at(1_100),
            ..told.delivery.clone()
        },
        lease: told.delivery.next_attempt_at,
        hold_until: Some(at(6_100)),
        events: Vec::new(),
    };
    setup.record_attempts(&[answered]).await.unwrap();
    let claimers = four_claimers(&url).await;
    let held = claim_everywhere(&claimers, 6_099, 3).await;
    assert!(held.is_empty(), "claimed while held: {held:?}");
    let after = claim_everywhere(&claimers, 6_100, 3).await;
    assert_eq!(after.get(endpoint.id.as_str()), Some(&3), "{after:?}");
}

/// Claims take turns under one advisory lock, and a claim that waited for its turn counts the
/// deliveries every claim before it took, though they were committed after it began: its
/// snapshot is taken once the lock is granted. (Taken with the lock in one statement, it would
/// be older than the other claim's commit and fill the endpoint's cap a second time.)
#[tokio::test]
async fn a_claim_that_waited_its_turn_counts_the_claims_committed_meanwhile() {
    let Some((url, _db)) = fresh_postgres("postgres_only::claim_takes_turns").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let owner = app("app_turns");
    queue(&store, &owner, &[endpoint_of(&owner, 1, None)], 10).await;

    let mut turn = a_claim_in_its_turn(&url).await;

    let request = claim_at(1_000, 3);
    let claim = store.claim_due(&request);
    let commit_once_waited_for = async {
        wait_for_a_lock_wait(store.pool()).await;
        sqlx::query("COMMIT").execute(&mut turn).await.unwrap();
    };
    let (claimed, ()) = tokio::join!(claim, commit_once_waited_for);
    let claimed = claimed.unwrap();
    assert!(
        claimed.is_empty(),
        "the cap was full when its turn came, yet it claimed {}",
        claimed.len()
    );
}

/// An API update disabling an endpoint while hookd disables it (its transaction holding the
/// row) waits for it, and finds no transition to tell: `endpoint.disabled` is written once, by
/// whoever disabled it. (SQLite runs writes one at a time; there is no such race.)
#[tokio::test]
async fn an_update_racing_hookds_disabling_tells_no_second_disable() {
    let Some((url, _db)) = fresh_postgres("postgres_only::update_races_disable").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let ops = ensure_operations_app(&store, Timestamp::from_millis(0))
        .await
        .unwrap();
    let owner = app("app_race");
    store.create_app(&owner).await.unwrap();
    let ep = endpoint_of(&owner, 1, None);
    store.create_endpoint(&ep).await.unwrap();
    let about = EndpointRef::new(&owner, &ep);
    let at = Timestamp::from_millis(10);
    let updated = OperationalEvent::EndpointUpdated(about.clone()).message(&ops.id, at);
    let manual = OperationalEvent::EndpointDisabled {
        endpoint: about,
        fail_since: None,
        trigger: DisableTrigger::Manual,
        reason: "disabled through the API".into(),
    }
    .message(&ops.id, at);

    // hookd's disabling, not yet committed, as `disable_endpoint` writes it.
    let mut hookd = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut disabling = hookd.begin().await.unwrap();
    sqlx::query("UPDATE hookd.endpoints SET disabled = true WHERE id = $1")
        .bind(ep.id.as_str())
        .execute(&mut *disabling)
        .await
        .unwrap();
    let mut off = ep.clone();
    off.disabled = true;
    let change = EndpointUpdate {
        endpoint: &off,
        disabled_as_read: None,
        events: std::slice::from_ref(&updated),
        on_toggle: std::slice::from_ref(&manual),
        keys: None,
    };
    let update = store.update_endpoint_with(&change);
    let commit_once_waited_for = async {
        wait_for_a_lock_wait(store.pool()).await;
        disabling.commit().await.unwrap();
    };
    let (written, ()) = tokio::join!(update, commit_once_waited_for);
    written.unwrap();

    let stored = store.get_message(&ops.id, updated.id.as_str()).await;
    assert_eq!(stored.unwrap(), Some(updated));
    assert_eq!(
        store
            .get_message(&ops.id, manual.id.as_str())
            .await
            .unwrap(),
        None,
        "hookd disabled it first: the update is no transition"
    );
}

/// Waits (bounded) until a session of this database waits for a row lock.
/// Another process's claim in its turn, on a connection of its own: it holds the claims' lock
/// and leases three deliveries, the endpoint's whole cap (as `claim_at(_, 3)`), not yet
/// committed. `COMMIT` on the connection ends its turn.
async fn a_claim_in_its_turn(url: &str) -> sqlx::PgConnection {
    let mut other = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut other).await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(448546171748)")
        .execute(&mut other)
        .await
        .unwrap();
    let leased = sqlx::query(
        "UPDATE hookd.deliveries SET status = 3, next_attempt_at = 61000
         WHERE message_id IN (SELECT message_id FROM hookd.deliveries
                              ORDER BY next_attempt_at LIMIT 3)",
    )
    .execute(&mut other)
    .await
    .unwrap();
    assert_eq!(leased.rows_affected(), 3);
    other
}

async fn wait_for_a_lock_wait(pool: &sqlx::PgPool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "nobody ever waited");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn concurrent_publishes_through_any_clone_commit_in_one_transaction() {
    let Some((url, _db)) = fresh_postgres("postgres_only::publish_batch").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let clone = store.clone();
    let owner = app("app_batch");
    store.create_app(&owner).await.unwrap();
    for i in 0..3 {
        store
            .create_endpoint(&endpoint_of(&owner, i, None))
            .await
            .unwrap();
    }
    let mut taken = message_of(&owner, 1);
    taken.event_id = Some("evt-taken".into());
    store.publish(NewMessage::new(taken.clone())).await.unwrap();
    // Taken event ids (in the database, and twice in the batch) are answered each alone and
    // must not cost the others their batch.
    let messages: Vec<Message> = (0..200)
        .map(|i| {
            let mut message = message_of(&owner, 10 + i);
            message.event_id = match i {
                0 => Some("evt-taken".into()),
                1 | 2 => Some("evt-twice".into()),
                _ => None,
            };
            message
        })
        .collect();
    let publishes = messages.iter().enumerate().map(|(i, message)| {
        let handle = if i % 2 == 0 { &store } else { &clone };
        handle.publish(NewMessage::new(message.clone()))
    });
    let outcomes = futures::future::join_all(publishes).await;
    let mut written = Vec::new();
    for (i, (message, outcome)) in messages.iter().zip(outcomes).enumerate() {
        match outcome {
            Ok(created) => {
                assert_eq!(created.deliveries, 3);
                written.push(message.id.as_str());
            }
            Err(StoreError::Conflict(_)) => assert!(i == 0 || i == 2, "{i} refused"),
            Err(other) => panic!("{i}: {other:?}"),
        }
    }
    assert_eq!(written.len(), 198);
    // Rows written by one transaction share its id (`xmin`). The test runtime has one thread,
    // so every publish is queued before the publish task runs: one batch, one transaction,
    // whichever clone each went through. Written alone, they would show 198 ids.
    let transactions: Vec<String> = sqlx::query_scalar(
        "SELECT xmin::text FROM messages WHERE id = ANY($1)
         UNION SELECT xmin::text FROM deliveries WHERE message_id = ANY($1)",
    )
    .bind(&written)
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(
        transactions.len(),
        1,
        "transactions that wrote the publishes"
    );
    let deliveries: i64 =
        sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE message_id = ANY($1)")
            .bind(&written)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(deliveries, 198 * 3);
}

#[tokio::test]
async fn publishes_fail_while_the_database_is_away_and_work_once_it_is_back() {
    let Some((url, db)) = fresh_postgres("postgres_only::publish_outage").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let owner = app("app_outage");
    store.create_app(&owner).await.unwrap();
    store
        .create_endpoint(&endpoint_of(&owner, 0, None))
        .await
        .unwrap();
    store
        .publish(NewMessage::new(message_of(&owner, 1)))
        .await
        .unwrap();
    let server = std::env::var(POSTGRES_URL_VAR).unwrap();
    let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
    let allow = |allowed: bool| {
        let name = db.name();
        format!(r#"ALTER DATABASE "{name}" ALLOW_CONNECTIONS {allowed}"#)
    };
    sqlx::query(AssertSqlSafe(allow(false)))
        .execute(&mut admin)
        .await
        .unwrap();
    // With a timeout, each call returns once its backend is gone.
    sqlx::query("SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = $1")
        .bind(db.name())
        .execute(&mut admin)
        .await
        .unwrap();

    let messages: Vec<Message> = (0..20).map(|i| message_of(&owner, 10 + i)).collect();
    let outcomes = futures::future::join_all(
        messages
            .iter()
            .map(|m| store.publish(NewMessage::new(m.clone()))),
    )
    .await;
    for outcome in outcomes {
        assert!(
            matches!(outcome, Err(StoreError::Unavailable(ref why)) if why.contains("not currently accepting connections")),
            "{outcome:?}"
        );
    }

    sqlx::query(AssertSqlSafe(allow(true)))
        .execute(&mut admin)
        .await
        .unwrap();
    let after = message_of(&owner, 100);
    assert_eq!(
        store
            .publish(NewMessage::new(after.clone()))
            .await
            .unwrap()
            .deliveries,
        1
    );
    for message in &messages {
        assert_eq!(
            store
                .get_message(&owner.id, message.id.as_str())
                .await
                .unwrap(),
            None
        );
    }
}

#[tokio::test]
async fn the_publish_task_ends_with_the_last_clone_of_its_store() {
    let Some((url, db)) = fresh_postgres("postgres_only::publish_task_end").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let clone = store.clone();
    let owner = app("app_task");
    store.create_app(&owner).await.unwrap();
    store
        .publish(NewMessage::new(message_of(&owner, 1)))
        .await
        .unwrap();
    drop(store);
    clone
        .publish(NewMessage::new(message_of(&owner, 2)))
        .await
        .unwrap();
    drop(clone);
    // The task holds the pool's last handle: once the task ends, the pool's connections close.
    let server = std::env::var(POSTGRES_URL_VAR).unwrap();
    let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let connected: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = $1")
                .bind(db.name())
                .fetch_one(&mut admin)
                .await
                .unwrap();
        if connected == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{connected} connections outlived the store"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An engine's side of a handoff for these tests: takes a delivery to any endpoint, under a
/// lease until 70 s, within a cap of 3; keeps what it is given and counts the room it held
/// that came back unused.
struct Taker {
    started: std::sync::Mutex<Vec<ClaimedDelivery>>,
    given_back: Arc<AtomicUsize>,
    me: std::sync::Weak<Taker>,
}

/// Room a [`Taker`] held; counted when dropped unused.
struct Room(Arc<AtomicUsize>);

impl Drop for Room {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Handoff for Taker {
    fn reserve(&self, _endpoint: &EndpointId) -> Option<Reserved> {
        let (me, room) = (self.me.upgrade()?, Room(self.given_back.clone()));
        Some(Reserved::new(
            Timestamp::from_millis(70_000),
            move |claimed| {
                std::mem::forget(room);
                me.started.lock().unwrap().push(claimed);
            },
        ))
    }

    fn per_endpoint(&self) -> usize {
        3
    }
}

impl Taker {
    /// A taker of every new delivery `store` writes.
    fn on(store: &PgStore) -> Arc<Self> {
        let taker = Arc::new_cyclic(|me| Self {
            started: std::sync::Mutex::default(),
            given_back: Arc::default(),
            me: me.clone(),
        });
        let weak: std::sync::Weak<dyn Handoff> = Arc::downgrade(&taker) as std::sync::Weak<Self>;
        assert_eq!(store.hand_off_new_deliveries(weak), HandoffMode::Shared);
        taker
    }

    /// The messages of the deliveries handed off, in order.
    fn started(&self) -> Vec<MessageId> {
        let started = self.started.lock().unwrap();
        started.iter().map(|c| c.message.id.clone()).collect()
    }
}

/// The engine is handed no new delivery of a broker destination (it does not publish to
/// brokers): it is written pending, for a claim.
#[tokio::test]
async fn a_broker_destinations_new_deliveries_are_not_handed_over() {
    let Some((url, _db)) = fresh_postgres("postgres_only::broker_handoff").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let owner = app("app_broker");
    let broker = Endpoint {
        destination: hookd_core::destination::Destination::NatsJetStream(
            hookd_core::destination::NatsConfig {
                url: "nats://127.0.0.1:4222".into(),
                subject: "orders".into(),
            },
        ),
        ..endpoint_of(&owner, 1, None)
    };
    queue(&store, &owner, std::slice::from_ref(&broker), 0).await;
    let taker = Taker::on(&store);
    let created = store
        .publish(NewMessage::new(message_of(&owner, 2_000)))
        .await
        .unwrap();
    assert_eq!((created.deliveries, created.queued), (1, 1));
    assert!(taker.started().is_empty());
}

/// A delivery handed to the publishing process's engine counts against its endpoint's cap
/// like a claimed one, in every process: the publish hands off only the room the cap has
/// left after the other processes' attempts, and their claims then find the cap full.
#[tokio::test]
async fn new_deliveries_are_handed_over_only_within_their_endpoints_room_across_processes() {
    let Some((url, _db)) = fresh_postgres("postgres_only::handoff_room").await else {
        return;
    };
    let other = PgStore::connect(&url).await.unwrap();
    let owner = app("app_handoff");
    let endpoint = endpoint_of(&owner, 1, None);
    queue(&other, &owner, std::slice::from_ref(&endpoint), 2).await;
    assert_eq!(other.claim_due(&claim_at(1_000, 3)).await.unwrap().len(), 2);

    let publisher = PgStore::connect(&url).await.unwrap();
    let taker = Taker::on(&publisher);
    let messages: Vec<Message> = (0..3).map(|i| message_of(&owner, 2_000 + i)).collect();
    let mut queued = Vec::new();
    for message in &messages {
        queued.push(
            publisher
                .publish(NewMessage::new(message.clone()))
                .await
                .unwrap()
                .queued,
        );
    }

    assert_eq!(
        queued,
        [0, 1, 1],
        "one delivery of room was left of the cap of 3"
    );
    assert_eq!(taker.started(), [messages[0].id.clone()]);
    assert_eq!(taker.given_back.load(Ordering::SeqCst), 2);
    let deliveries = publisher
        .list_message_deliveries(&owner.id, &messages[0])
        .await
        .unwrap();
    let handed = &deliveries[0].1;
    assert_eq!(
        (handed.status, handed.next_attempt_at),
        (
            DeliveryStatus::Sending,
            Some(Timestamp::from_millis(70_000))
        )
    );
    let claimed = other.claim_due(&claim_at(2_003, 3)).await.unwrap();
    assert!(
        claimed.is_empty(),
        "claimed past the cap: {}",
        claimed.len()
    );
}

/// A publish handing deliveries over takes its turn under the claims' lock, and counts the
/// deliveries a claim took while it waited: the room it sees is read once the lock is
/// granted.
#[tokio::test]
async fn a_handoff_that_waited_its_turn_counts_the_claims_committed_meanwhile() {
    let Some((url, _db)) = fresh_postgres("postgres_only::handoff_turns").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let owner = app("app_handoff_turns");
    queue(&store, &owner, &[endpoint_of(&owner, 1, None)], 5).await;
    let taker = Taker::on(&store);

    let mut turn = a_claim_in_its_turn(&url).await;

    let message = message_of(&owner, 1_000);
    let publish = store.publish(NewMessage::new(message.clone()));
    let commit_once_waited_for = async {
        wait_for_a_lock_wait(store.pool()).await;
        sqlx::query("COMMIT").execute(&mut turn).await.unwrap();
    };
    let (created, ()) = tokio::join!(publish, commit_once_waited_for);
    assert_eq!(created.unwrap().queued, 1, "handed off past a full cap");
    assert!(taker.started().is_empty());
}

/// Rate-limited endpoints keep their windows in claims, and an endpoint paused by a 429 gets
/// nothing until the pause ends: their new deliveries are left to claims.
#[tokio::test]
async fn new_deliveries_to_rate_limited_or_paused_endpoints_wait_for_a_claim() {
    let Some((url, _db)) = fresh_postgres("postgres_only::handoff_windows").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    let owner = app("app_handoff_windows");
    let (plain, throttled, paused) = (
        endpoint_of(&owner, 1, None),
        endpoint_of(&owner, 2, Some(5)),
        endpoint_of(&owner, 3, None),
    );
    queue(
        &store,
        &owner,
        &[plain.clone(), throttled, paused.clone()],
        0,
    )
    .await;
    sqlx::query("UPDATE hookd.endpoints SET next_window_at = 9000 WHERE id = $1")
        .bind(paused.id.as_str())
        .execute(store.pool())
        .await
        .unwrap();
    let taker = Taker::on(&store);

    let message = message_of(&owner, 1_000);
    let created = store
        .publish(NewMessage::new(message.clone()))
        .await
        .unwrap();

    assert_eq!((created.deliveries, created.queued), (3, 2));
    let started = taker.started.lock().unwrap();
    let handed: Vec<&EndpointId> = started.iter().map(|c| &c.endpoint.id).collect();
    assert_eq!(handed, [&plain.id]);
    assert_eq!(taker.given_back.load(Ordering::SeqCst), 2);
}

/// The ordering locks are one per key, whatever the endpoints a keyed message fans out to, and
/// one per strict endpoint: a batch of keyed messages to many endpoints stays far inside
/// PostgreSQL's lock table (`max_locks_per_transaction` per connection).
#[tokio::test]
async fn ordering_locks_are_one_per_key_not_per_endpoint() {
    let Some((url, _db)) = fresh_postgres("postgres_only::ordering_locks").await else {
        return;
    };
    PgStore::connect(&url).await.expect("migrates");
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("SET search_path = hookd")
        .execute(&mut conn)
        .await
        .unwrap();
    let mut tx = conn.begin().await.unwrap();
    // 100 endpoints x 3 keys, and 2 strict endpoints' ''.
    let mut eps: Vec<String> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for e in 0..100 {
        for k in 0..3 {
            eps.push(format!("ep_{e}"));
            keys.push(format!("key-{k}"));
        }
    }
    for e in ["ep_strict_1", "ep_strict_2"] {
        eps.push(e.into());
        keys.push(String::new());
    }
    sqlx::query("SELECT lock_ordering_keys($1, $2)")
        .bind(&eps)
        .bind(&keys)
        .execute(&mut *tx)
        .await
        .unwrap();
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    assert_eq!(held, 5, "three keys and two strict endpoints");
}
