//! The transactional outbox on PostgreSQL: a producer's committed row becomes exactly one
//! message, a rolled-back (or not yet committed) one never does, bad rows keep their error
//! without blocking the rows behind them, and concurrent relays never relay a row twice.
//! Producers are separate connections, as an application's would be, writing through
//! `hookd-outbox`. Skipped when `HOOKD_TEST_POSTGRES_URL` is unset.

mod harness;

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use harness::fixtures::app;
use hookd_outbox::Event;
use hookd_store::postgres::PgStore;
use hookd_store::prelude::*;
use hookd_store::testing::{PgDatabaseGuard, fresh_postgres};
use hookd_store::{RelayRules, Relayed, Wakeups};
use sqlx::AssertSqlSafe;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use tokio::sync::Notify;

use harness::outbox::*;

/// A fresh database with hookd's schema and the application `acme`, and a pool of the
/// test's own (a producer's or an administrator's); `None` when PostgreSQL tests are skipped.
/// The database is dropped with it.
struct Postgres {
    url: String,
    store: PgStore,
    pool: PgPool,
    _db: PgDatabaseGuard,
}

async fn postgres_with_acme(test: &str) -> Option<Postgres> {
    let (url, db) = fresh_postgres(test).await?;
    let store = PgStore::connect(&url).await.unwrap();
    acme(&store).await;
    let pool = PgPoolOptions::new().connect(&url).await.unwrap();
    Some(Postgres {
        url,
        store,
        pool,
        _db: db,
    })
}

#[tokio::test]
async fn postgres_commit_relays_once_rollback_and_uncommitted_never() {
    let Some(pg) = postgres_with_acme("outbox::postgres_commit").await else {
        return;
    };
    let (store, producer) = (&pg.store, &pg.pool);

    let mut committed = producer.begin().await.unwrap();
    event("committed").insert(&mut *committed).await.unwrap();
    committed.commit().await.unwrap();
    let mut rolled_back = producer.begin().await.unwrap();
    event("rolled-back")
        .insert(&mut *rolled_back)
        .await
        .unwrap();
    rolled_back.rollback().await.unwrap();
    let mut open = producer.begin().await.unwrap();
    event("open").insert(&mut *open).await.unwrap();

    let first = relay(store, &RULES).await;
    assert_eq!((first.messages, first.deliveries, first.failed), (1, 1, 0));
    assert_eq!(published(store, "acme").await, [("committed".into(), 1)]);
    assert_eq!(
        relay(store, &RULES).await,
        Relayed::default(),
        "each row once"
    );

    open.commit().await.unwrap();
    assert_eq!(relay(store, &RULES).await.messages, 1);
    assert_eq!(
        published(store, "acme").await,
        [("committed".into(), 1), ("open".into(), 1)]
    );
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM hookd.outbox")
        .fetch_one(producer)
        .await
        .unwrap();
    assert_eq!(left, 0, "relayed rows are deleted");
}

#[tokio::test]
async fn postgres_bad_rows_keep_their_error_and_never_block() {
    let Some(pg) = postgres_with_acme("outbox::postgres_bad_rows").await else {
        return;
    };
    let (store, producer) = (&pg.store, &pg.pool);
    let rows = [
        Event::from_json_text("nobody", "order.shipped", "{}"),
        Event::from_json_text("acme", "order.shipped", "[1, 2]"),
        Event::from_json_text("acme", "order shipped", "{}"),
        event("once"),
        event("once"),
        Event::from_json_text(
            "acme",
            "order.shipped",
            format!(r#"{{"big": "{}"}}"#, "x".repeat(2000)),
        ),
        event("good"),
    ];
    for row in &rows {
        row.insert(producer).await.unwrap();
    }
    sqlx::query("INSERT INTO hookd.outbox (app, event_type, payload, channels) VALUES ('acme', 'a.b', '{}', ARRAY[NULL]::text[])")
        .execute(producer)
        .await
        .unwrap();

    let relayed = relay(store, &RULES).await;
    assert_eq!((relayed.messages, relayed.failed), (2, 6), "{relayed:?}");
    assert_eq!(
        published(store, "acme").await,
        [("good".into(), 1), ("once".into(), 1)]
    );
    let errors: Vec<String> = sqlx::query_scalar(
        "SELECT error FROM hookd.outbox WHERE error IS NOT NULL AND failed_at IS NOT NULL ORDER BY id",
    )
    .fetch_all(producer)
    .await
    .unwrap();
    assert_eq!(errors.len(), 6);
    for (error, expected) in errors.iter().zip([
        "app: no application has the id or uid \"nobody\"",
        "payload: must be a JSON object",
        "eventType: may contain only",
        "a message with eventId \"once\" already exists",
        "the payload is",
        "channels: must be a list of channel names",
    ]) {
        assert!(
            error.starts_with(expected),
            "{error:?} is not {expected:?}…"
        );
    }
    assert_eq!(
        relay(store, &RULES).await,
        Relayed::default(),
        "kept rows are skipped"
    );

    // Once the cause is fixed, clearing the error relays the row.
    let nobody = app(Some("nobody"), 5);
    store.create_app(&nobody).await.unwrap();
    sqlx::query("UPDATE hookd.outbox SET error = NULL WHERE app = 'nobody'")
        .execute(producer)
        .await
        .unwrap();
    assert_eq!(relay(store, &RULES).await.messages, 1);
}

#[tokio::test]
async fn postgres_a_commit_and_another_processs_deliveries_wake_a_watcher_without_polling() {
    let Some((url, _db)) = fresh_postgres("outbox::postgres_wakeups").await else {
        return;
    };
    let watching = PgStore::connect(&url).await.unwrap();
    let other_process = PgStore::connect(&url).await.unwrap();
    let wakeups = Wakeups::default();
    assert!(
        watching.watch(wakeups.clone()).await.unwrap(),
        "PostgreSQL signals"
    );
    // Nothing else wakes them here: no relay or engine runs, and nothing polls.
    let woken = async |notify: &Notify| {
        tokio::time::timeout(Duration::from_secs(10), notify.notified())
            .await
            .is_ok()
    };

    let producer = PgPoolOptions::new().connect(&url).await.unwrap();
    let mut tx = producer.begin().await.unwrap();
    event("signalled").insert(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    assert!(woken(&wakeups.outbox).await, "the commit woke the relay");

    other_process.announce_deliveries().await.unwrap();
    assert!(
        woken(&wakeups.deliveries).await,
        "another process's deliveries woke the engine"
    );
}

/// The grants `docs/outbox.md` gives a producer's own role, word for word.
const PRODUCER_GRANTS: [&str; 2] = [
    "GRANT USAGE ON SCHEMA hookd TO {role}",
    "GRANT INSERT, SELECT (id) ON hookd.outbox TO {role}",
];

#[tokio::test]
async fn postgres_a_role_with_the_documented_grants_produces_with_sql_and_with_the_helper() {
    let Some(pg) = postgres_with_acme("outbox::postgres_producer_role").await else {
        return;
    };
    let (store, admin) = (&pg.store, &pg.pool);
    let url = &pg.url;
    let role = format!(
        "hookd_test_producer_{:016x}",
        rand::RngExt::random::<u64>(&mut rand::rng())
    );
    let as_admin = async |sql: String| sqlx::query(AssertSqlSafe(sql)).execute(admin).await;
    as_admin(format!("CREATE ROLE {role} LOGIN")).await.unwrap();
    for grant in PRODUCER_GRANTS {
        as_admin(grant.replace("{role}", &role)).await.unwrap();
    }

    let options = PgConnectOptions::from_str(url).unwrap().username(&role);
    let produced = async {
        let producer = PgPoolOptions::new().connect_with(options).await?;
        let mut tx = producer.begin().await?;
        event("helper").insert(&mut *tx).await?;
        tx.commit().await?;
        sqlx::query(
            "INSERT INTO hookd.outbox (app, event_type, payload, event_id)
             VALUES ('acme', 'order.shipped', '{}', 'sql')",
        )
        .execute(&producer)
        .await?;
        producer.close().await;
        Ok::<_, sqlx::Error>(())
    }
    .await;
    // The role is the server's, not the test database's: dropped before anything can fail.
    as_admin(format!("DROP OWNED BY {role}")).await.unwrap();
    as_admin(format!("DROP ROLE {role}")).await.unwrap();

    produced.expect("the documented grants suffice");
    assert_eq!(relay(store, &RULES).await.messages, 2);
    assert_eq!(
        published(store, "acme").await,
        [("helper".into(), 1), ("sql".into(), 1)]
    );
}

#[tokio::test]
async fn postgres_strict_mode_refuses_unknown_event_types() {
    let Some((url, _db)) = fresh_postgres("outbox::postgres_strict").await else {
        return;
    };
    let store = PgStore::connect(&url).await.unwrap();
    acme(&store).await;
    event("unknown").insert(store.pool()).await.unwrap();
    let strict = RelayRules {
        strict_event_types: true,
        ..RULES
    };
    assert_eq!(relay(&store, &strict).await.failed, 1);
    let error: String = sqlx::query_scalar("SELECT error FROM hookd.outbox")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(error, "eventType: no event type of this name exists");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_ten_thousand_rows_from_concurrent_producers_three_relays_no_duplicates() {
    const PRODUCERS: usize = 8;
    const TRANSACTIONS: usize = 50;
    const ROWS: usize = 25; // 8 × 50 × 25 = 10,000
    let Some((url, _db)) = fresh_postgres("outbox::postgres_ten_thousand").await else {
        return;
    };
    let relays: Vec<PgStore> = futures::future::join_all((0..3).map(|_| PgStore::connect(&url)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    acme(&relays[0]).await;
    let producing = Arc::new(AtomicBool::new(true));
    let relay_tasks: Vec<_> = relays
        .into_iter()
        .map(|store| {
            let producing = producing.clone();
            tokio::spawn(async move {
                let mut relayed = 0;
                loop {
                    let done = !producing.load(Ordering::SeqCst);
                    let pass = relay(&store, &RULES).await;
                    assert_eq!(pass.failed, 0);
                    relayed += pass.messages;
                    if done && pass.rows() == 0 {
                        return (store, relayed);
                    }
                }
            })
        })
        .collect();
    let producer = PgPoolOptions::new()
        .max_connections(PRODUCERS as u32)
        .connect(&url)
        .await
        .unwrap();
    let producers = (0..PRODUCERS).map(|p| {
        let producer = producer.clone();
        tokio::spawn(async move {
            for t in 0..TRANSACTIONS {
                let mut tx = producer.begin().await.unwrap();
                for r in 0..ROWS {
                    let payload = format!(r#"{{"row": "{p}-{t}-{r}"}}"#);
                    Event::from_json_text("acme", "order.shipped", payload)
                        .insert(&mut *tx)
                        .await
                        .unwrap();
                }
                tx.commit().await.unwrap();
                let mut doomed = producer.begin().await.unwrap();
                Event::from_json_text("acme", "order.shipped", r#"{"rolledBack": true}"#)
                    .insert(&mut *doomed)
                    .await
                    .unwrap();
                doomed.rollback().await.unwrap();
            }
        })
    });
    for task in producers.collect::<Vec<_>>() {
        task.await.unwrap();
    }
    producing.store(false, Ordering::SeqCst);
    let mut per_relay = Vec::new();
    let mut stores = Vec::new();
    for task in relay_tasks {
        let (store, relayed) = task.await.unwrap();
        per_relay.push(relayed);
        stores.push(store);
    }
    let total = PRODUCERS * TRANSACTIONS * ROWS;
    assert_eq!(per_relay.iter().sum::<usize>(), total, "{per_relay:?}");
    // Otherwise the relays took turns, and "no duplicates" proved nothing about racing.
    assert!(
        per_relay.iter().all(|&relayed| relayed > 0),
        "a relay took no rows: {per_relay:?}"
    );
    let payloads: Vec<Vec<u8>> = sqlx::query_scalar("SELECT payload FROM hookd.messages")
        .fetch_all(stores[0].pool())
        .await
        .unwrap();
    assert_eq!(payloads.len(), total);
    let distinct: HashSet<&Vec<u8>> = payloads.iter().collect();
    assert_eq!(distinct.len(), total, "no row was relayed twice");
    assert!(
        !distinct.contains(&br#"{"rolledBack": true}"#.to_vec()),
        "no rolled-back row was relayed"
    );
    let deliveries: i64 = sqlx::query_scalar("SELECT count(*) FROM hookd.deliveries")
        .fetch_one(stores[0].pool())
        .await
        .unwrap();
    assert_eq!(deliveries, i64::try_from(total).unwrap());
}

#[tokio::test]
async fn postgres_rows_with_an_ordering_key_are_relayed_by_one_pass_at_a_time_in_row_order() {
    let Some(pg) = postgres_with_acme("outbox::postgres_ordering_key").await else {
        return;
    };
    let (store, producer) = (&pg.store, &pg.pool);
    for (id, key) in [
        ("k1", Some("C-4471")),
        ("free", None),
        ("k2", Some("C-4471")),
    ] {
        let row = match key {
            Some(key) => keyed_event(id, key),
            None => event(id),
        };
        row.insert(producer).await.unwrap();
    }
    // Another process's pass holds the ordered rows' turn: this pass takes the rest only.
    let mut other = producer.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(hookd_store::postgres::ORDERED_ROWS_LOCK)
        .execute(&mut *other)
        .await
        .unwrap();
    assert_eq!(relay(store, &RULES).await.messages, 1);
    assert_eq!(keyed(store).await, [("free".into(), None, false)]);
    other.rollback().await.unwrap();
    assert_eq!(relay(store, &RULES).await.messages, 2);
    let key = Some("C-4471".to_owned());
    assert_eq!(
        keyed(store).await,
        [
            ("free".into(), None, false),
            ("k1".into(), key.clone(), false),
            ("k2".into(), key, true),
        ]
    );
}
