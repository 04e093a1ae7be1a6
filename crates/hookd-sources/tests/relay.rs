//! Relaying outbox sources, on a real database of each kind (PostgreSQL and MySQL/MariaDB
//! tests are skipped without their `HOOKD_TEST_*_URL`) into hookd on SQLite: a committed row
//! becomes exactly one message, a rolled-back one none; a relay stopped between publishing
//! and removing its rows publishes them once; a bad row keeps its error without blocking the
//! rows behind it; a bound source fills in its application.

mod support;

use hookd_sources::SourceError;
use hookd_store::prelude::*;
use support::{Hookd, Producer, event};

hookd_sources::on_every_kind!(
    a_committed_row_becomes_one_message_and_a_rolled_back_one_none,
    rows_published_but_not_removed_are_removed_and_not_published_again,
    a_refused_row_keeps_its_error_and_the_rows_behind_it_are_relayed,
    a_bound_source_sends_rows_without_an_application_to_its_own,
    a_table_installed_again_is_a_new_table,
    installing_twice_changes_nothing,
    a_producer_never_waits_for_a_relay_holding_rows,
    the_printed_sql_installs_what_install_does,
);

async fn a_committed_row_becomes_one_message_and_a_rolled_back_one_none(producer: Producer) {
    let hookd = Hookd::start().await;
    let relay = hookd.relay(&producer, None);
    producer.write(&[event(1)], false).await;
    producer.commit(&[event(2), event(3)]).await;

    assert!(!relay.pass().await.unwrap(), "one pass takes every row");
    assert!(!relay.pass().await.unwrap());

    assert_eq!(hookd.payloads().await, [r#"{"n": 2}"#, r#"{"n": 3}"#]);
    assert_eq!(producer.rows().await, [], "relayed rows are removed");
}

async fn rows_published_but_not_removed_are_removed_and_not_published_again(producer: Producer) {
    let hookd = Hookd::start().await;
    producer.commit(&[event(1), event(2)]).await;
    // A relay that stops after hookd's commit and before removing the rows: it published
    // them, and its hold on the producer's database ends without removing anything.
    let table = hookd_sources::Table::new(&producer.url).unwrap();
    let taken = table.take(100, None).await.unwrap().expect("rows wait");
    let fates = hookd
        .store
        .relay_source_rows(&taken.table_id, taken.rows, &support::RULES, now())
        .await
        .unwrap();
    assert!(
        fates
            .iter()
            .all(|fate| matches!(fate, hookd_store::RowFate::Published { .. }))
    );
    drop(taken.hold);
    assert_eq!(
        producer.rows().await.len(),
        2,
        "the rows are still in the table"
    );
    producer.commit(&[event(3)]).await;

    let relay = hookd.relay(&producer, None);
    relay.pass().await.unwrap();

    let payloads = hookd.payloads().await;
    assert_eq!(payloads, [r#"{"n": 1}"#, r#"{"n": 2}"#, r#"{"n": 3}"#]);
    assert_eq!(producer.rows().await, []);
}

async fn a_refused_row_keeps_its_error_and_the_rows_behind_it_are_relayed(producer: Producer) {
    let hookd = Hookd::start().await;
    let relay = hookd.relay(&producer, None);
    let unknown = hookd_outbox::Event::from_json_text("globex", "order.shipped", "{}");
    producer.commit(&[event(1), unknown, event(3)]).await;

    relay.pass().await.unwrap();

    assert_eq!(hookd.payloads().await, [r#"{"n": 1}"#, r#"{"n": 3}"#]);
    let rows = producer.rows().await;
    assert_eq!(rows.len(), 1);
    let error = rows[0].1.as_deref().unwrap();
    assert!(
        error.contains("no application has the id or uid \"globex\""),
        "{error}"
    );
    // Fixed (here: the application now exists under that uid) and cleared, it is relayed.
    let mut globex = hookd
        .store
        .get_app(hookd.app.as_str())
        .await
        .unwrap()
        .unwrap();
    globex.uid = Some("globex".into());
    hookd.store.update_app(&globex).await.unwrap();
    producer
        .execute("UPDATE hookd_outbox SET error = NULL, failed_at = NULL")
        .await;
    relay.pass().await.unwrap();
    assert_eq!(hookd.payloads().await.len(), 3);
    assert_eq!(producer.rows().await, []);
}

async fn a_bound_source_sends_rows_without_an_application_to_its_own(producer: Producer) {
    let hookd = Hookd::start().await;
    let relay = hookd.relay(&producer, Some("acme"));
    let unnamed = hookd_outbox::Event::from_json_text("", "order.shipped", r#"{"n": 1}"#);
    let other = hookd_outbox::Event::from_json_text("globex", "order.shipped", r#"{"n": 2}"#);
    producer.commit(&[unnamed, other, event(3)]).await;

    relay.pass().await.unwrap();

    assert_eq!(hookd.payloads().await, [r#"{"n": 1}"#, r#"{"n": 3}"#]);
    let rows = producer.rows().await;
    assert_eq!(rows.len(), 1);
    assert!(
        rows[0].1.as_deref().unwrap().contains("\"acme\" only"),
        "{rows:?}"
    );
}

/// A table dropped and installed again numbers its rows from 1 again; its rows are not
/// mistaken for the old table's, which were published under the same ids.
async fn a_table_installed_again_is_a_new_table(producer: Producer) {
    let hookd = Hookd::start().await;
    let relay = hookd.relay(&producer, None);
    producer.commit(&[event(1)]).await;
    relay.pass().await.unwrap();
    producer
        .execute("DROP TABLE hookd_outbox; DROP TABLE hookd_outbox_contract")
        .await;
    hookd_sources::install(&producer.url, "producer", "hookd")
        .await
        .unwrap();
    producer.commit(&[event(2)]).await;

    relay.pass().await.unwrap();

    assert_eq!(hookd.payloads().await, [r#"{"n": 1}"#, r#"{"n": 2}"#]);
}

async fn installing_twice_changes_nothing(producer: Producer) {
    producer.commit(&[event(1)]).await;
    let again = hookd_sources::install(&producer.url, "producer", "hookd")
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(
        producer.rows().await.len(),
        1,
        "the waiting row is still there"
    );
}

/// Between taking rows and settling them a relay publishes them in hookd, which may take a
/// while; the producer's transactions meanwhile insert (keyed rows too) without waiting.
async fn a_producer_never_waits_for_a_relay_holding_rows(producer: Producer) {
    let hookd = Hookd::start().await;
    producer
        .commit(&[event(1), event(2).ordering_key("order-1")])
        .await;
    let table = hookd_sources::Table::new(&producer.url).unwrap();
    let taken = table.take(100, None).await.unwrap().expect("rows wait");
    assert_eq!(taken.rows.len(), 2);

    producer
        .commit_without_waiting(&[event(3), event(4).ordering_key("order-1")])
        .await;

    // Given back unsettled, and so unlocked before the relay's pass: a hold merely dropped
    // rolls back on its connection's next use, which a pass may not wait for.
    table.settle(taken.hold, &[], &[]).await.unwrap();
    hookd.relay(&producer, None).pass().await.unwrap();
    assert_eq!(hookd.payloads().await.len(), 4);
}

/// `hookd outbox sql KIND`, applied by hand instead of `install`, makes a table the relay
/// takes rows from.
async fn the_printed_sql_installs_what_install_does(producer: Producer) {
    let hookd = Hookd::start().await;
    producer
        .execute("DROP TABLE hookd_outbox; DROP TABLE hookd_outbox_contract")
        .await;
    producer
        .execute(&hookd_sources::install::sql(producer.kind()))
        .await;
    producer.commit(&[event(1)]).await;

    hookd.relay(&producer, None).pass().await.unwrap();

    assert_eq!(hookd.payloads().await, [r#"{"n": 1}"#]);
    assert_eq!(producer.rows().await, []);
}

#[tokio::test]
async fn a_database_without_the_table_says_to_install_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    rusqlite::Connection::open(&path).unwrap();
    let table = hookd_sources::Table::new(&format!("sqlite://{}", path.display())).unwrap();
    let error = table.take(10, None).await.err().expect("no table");
    assert!(matches!(error, SourceError::NotInstalled(_)), "{error:?}");
    assert!(
        error.to_string().contains("hookd outbox install"),
        "{error}"
    );
}

fn now() -> hookd_core::Timestamp {
    use hookd_core::Clock as _;
    hookd_core::SystemClock.now()
}
