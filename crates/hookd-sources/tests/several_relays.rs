//! Several relays on one source, as several hookd processes sharing a PostgreSQL database
//! would run them (each with its own connections to the source and to hookd's database):
//! every row is published once, and rows sharing an ordering key are published in table
//! order. On PostgreSQL and MySQL/MariaDB sources (skipped without their `HOOKD_TEST_*_URL`).

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hookd_store::postgres::PgStore;
use hookd_store::prelude::*;
use hookd_store::testing::fresh_postgres;
use support::{Producer, event, payloads, relay_into};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_source_keyed_rows_are_taken_by_one_relay_at_a_time() {
    if let Some(producer) = Producer::postgres("several_relays::postgres_keyed").await {
        keyed_rows_are_taken_by_one_relay_at_a_time(producer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_source_keyed_rows_are_taken_by_one_relay_at_a_time() {
    if let Some(producer) = Producer::mysql("several_relays::mysql_keyed").await {
        keyed_rows_are_taken_by_one_relay_at_a_time(producer).await;
    }
}

/// While one relay holds rows (and the right to take keyed rows), a second takes only the
/// rows nobody holds that have no ordering key.
async fn keyed_rows_are_taken_by_one_relay_at_a_time(producer: Producer) {
    producer
        .commit(&[event(1).ordering_key("k"), event(2)])
        .await;
    let first = hookd_sources::Table::new(&producer.url).unwrap();
    let second = hookd_sources::Table::new(&producer.url).unwrap();
    let held = first.take(100, None).await.unwrap().expect("rows wait");
    assert_eq!(held.rows.len(), 2);
    producer
        .commit(&[event(3).ordering_key("k"), event(4)])
        .await;

    let taken = second.take(100, None).await.unwrap().expect("row 4 waits");

    let payloads: Vec<&str> = taken.rows.iter().map(|row| row.payload.as_str()).collect();
    assert_eq!(payloads, [r#"{"n": 4}"#]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_source_three_relays_publish_each_row_once_and_each_key_in_order() {
    if let Some(producer) = Producer::postgres("several_relays::postgres_three").await {
        three_relays_publish_each_row_once_and_each_key_in_order(producer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_source_three_relays_publish_each_row_once_and_each_key_in_order() {
    if let Some(producer) = Producer::mysql("several_relays::mysql_three").await {
        three_relays_publish_each_row_once_and_each_key_in_order(producer).await;
    }
}

/// Three relays, each with its own store connection to one hookd PostgreSQL database, run
/// while the producer commits 600 rows in small transactions (a third of them on five
/// ordering keys).
async fn three_relays_publish_each_row_once_and_each_key_in_order(producer: Producer) {
    let Some((hookd_url, _hookd_db)) = fresh_postgres("several_relays::hookd").await else {
        return;
    };
    let first = PgStore::connect(&hookd_url).await.unwrap();
    let app = acme(&first).await;
    let mut stores: Vec<Arc<dyn Store>> = vec![Arc::new(first)];
    for _ in 0..2 {
        stores.push(Arc::new(PgStore::connect(&hookd_url).await.unwrap()));
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let relays: Vec<_> = stores
        .iter()
        .map(|store| {
            let relay = relay_into(store.clone(), &producer.url, None);
            let mut stopped = stopped.clone();
            tokio::spawn(relay.run(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            }))
        })
        .collect();

    const ROWS: usize = 600;
    for batch in (0..ROWS).collect::<Vec<_>>().chunks(3) {
        let events: Vec<_> = batch
            .iter()
            .map(|&n| match n % 3 {
                0 => event(n).ordering_key(format!("key-{}", n % 5)),
                _ => event(n),
            })
            .collect();
        producer.commit(&events).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while payloads(stores[0].as_ref(), &app).await.len() < ROWS {
        assert!(tokio::time::Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.send(true).unwrap();
    for relay in relays {
        relay.await.unwrap();
    }

    let published = payloads(stores[0].as_ref(), &app).await;
    let numbers: Vec<usize> = published.iter().map(|p| number(p)).collect();
    let mut sorted = numbers.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        ROWS,
        "each row published once: {} messages",
        numbers.len()
    );
    assert_eq!(numbers.len(), ROWS);
    let mut by_key: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for n in numbers.into_iter().filter(|n| n % 3 == 0) {
        by_key.entry(n % 5).or_default().push(n);
    }
    for (key, published) in by_key {
        assert!(
            published.is_sorted(),
            "key-{key} out of order: {published:?}"
        );
    }
    assert_eq!(producer.rows().await, []);
}

/// The application `acme` in a store; its id.
async fn acme(store: &PgStore) -> hookd_core::AppId {
    use hookd_core::Clock as _;
    let now = hookd_core::SystemClock.now();
    let app = hookd_core::model::Application {
        id: hookd_core::AppId::new(now),
        uid: Some("acme".into()),
        name: "Acme".into(),
        metadata: Default::default(),
        throttle_rate: None,
        envelope: false,
        created_at: now,
        updated_at: now,
    };
    store.create_app(&app).await.unwrap();
    app.id
}

fn number(payload: &str) -> usize {
    let value: serde_json::Value = serde_json::from_str(payload).unwrap();
    value["n"].as_u64().unwrap() as usize
}
