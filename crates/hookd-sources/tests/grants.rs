//! The grants `hookd outbox install` prints are enough: a producer role with exactly the
//! producer's grants inserts rows (with the helper, reading back the id), and a relay role with
//! exactly the relay's relays them. On PostgreSQL and MySQL/MariaDB (skipped without their
//! `HOOKD_TEST_*_URL`); roles and accounts are made for the test and dropped after it. Their
//! names need quoting (capitals, `-`), which the printed grants must do.

mod support;

use hookd_sources::testing::Producer;
use support::{Hookd, event, relay_into};

/// Runs `statements` (one per line, `--` comments ignored) as the producer's administrator.
async fn grant(producer: &Producer, grants: &str) {
    for statement in grants
        .lines()
        .map(|line| line.split("--").next().unwrap().trim())
    {
        if !statement.is_empty() {
            producer.execute(statement).await;
        }
    }
}

fn random_name(prefix: &str) -> String {
    format!("{prefix}_{}", hookd_store::testing::random_hex())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_the_printed_grants_are_enough_for_producer_and_relay() {
    let Some(producer) = Producer::postgres("grants::postgres").await else {
        return;
    };
    let (writer, relayer) = (random_name("Producer-x"), random_name("relay-x"));
    for role in [&writer, &relayer] {
        producer
            .execute(&format!("CREATE ROLE \"{role}\" LOGIN"))
            .await;
    }
    let installed = hookd_sources::install(&producer.url, &writer, &relayer)
        .await
        .unwrap();
    grant(&producer, &installed.grants).await;

    let as_writer = producer.url.replacen("postgres@", &format!("{writer}@"), 1);
    let writer_pool = sqlx::PgPool::connect(&as_writer).await.unwrap();
    let mut tx = writer_pool.begin().await.unwrap();
    let id = event(1).to_source().insert(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    writer_pool.close().await;
    assert!(id > 0);
    let as_relay = producer
        .url
        .replacen("postgres@", &format!("{relayer}@"), 1);
    relayed_by(&as_relay).await;

    // Roles belong to the server: revoke their grants here, then drop them.
    for role in [&writer, &relayer] {
        producer.execute(&format!("DROP OWNED BY \"{role}\"")).await;
    }
    drop(producer);
    let admin = std::env::var("HOOKD_TEST_POSTGRES_URL").unwrap();
    let admin = sqlx::PgPool::connect(&admin).await.unwrap();
    for role in [&writer, &relayer] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP ROLE \"{role}\"")))
            .execute(&admin)
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_the_printed_grants_are_enough_for_producer_and_relay() {
    let Some(producer) = Producer::mysql("grants::mysql").await else {
        return;
    };
    let (writer, relayer) = (random_name("p-x"), random_name("r-x"));
    for account in [&writer, &relayer] {
        producer
            .execute(&format!("CREATE USER '{account}'@'%' IDENTIFIED BY 'pw'"))
            .await;
    }
    // As MySQL writes an account, and bare.
    let quoted = format!("'{writer}'@'%'");
    let installed = hookd_sources::install(&producer.url, &quoted, &format!("{relayer}@%"))
        .await
        .unwrap();
    grant(&producer, &installed.grants).await;

    let as_account = |account: &str| producer.url.replacen("root@", &format!("{account}:pw@"), 1);
    let writer_pool = sqlx::MySqlPool::connect(&as_account(&writer))
        .await
        .unwrap();
    let mut tx = writer_pool.begin().await.unwrap();
    event(1).insert_mysql(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    writer_pool.close().await;
    relayed_by(&as_account(&relayer)).await;

    for account in [&writer, &relayer] {
        producer
            .execute(&format!("DROP USER '{account}'@'%'"))
            .await;
    }
}

/// Relays the source at `url` (connected as the relay role) and checks its one row arrived.
async fn relayed_by(url: &str) {
    let hookd = Hookd::start().await;
    let relay = relay_into(hookd.store.clone(), url, None);
    relay.pass().await.unwrap();
    assert_eq!(hookd.payloads().await, [r#"{"n": 1}"#]);
}
