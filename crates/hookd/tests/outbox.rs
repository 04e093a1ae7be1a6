//! The transactional outbox end to end, with the real binary and a real receiver: an
//! application's transaction that commits is delivered exactly once, one that rolls back
//! never, on PostgreSQL (a separate producer connection; skipped when
//! `HOOKD_TEST_POSTGRES_URL` is unset) and on SQLite (a connection sharing hookd's file).

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use hookd_outbox::Event;
use hookd_store::testing::{fresh_postgres, fresh_sqlite};
use support::{Api, Hookd};

const TOKEN: &str = "outbox-test-admin-token";

fn serve(database: &str) -> Hookd {
    Hookd::serve_local(database, TOKEN, &[])
}

/// Waits (bounded) until `done` holds, checking every 50 ms.
async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn event(app: &str, id: &str) -> Event {
    Event::from_json_text(app, "order.shipped", format!(r#"{{"event": "{id}"}}"#)).event_id(id)
}

/// After a rolled-back and then a committed row: exactly one delivery, of the committed one.
/// The relay takes rows in order, so had the rolled-back row been relayed it would have
/// arrived no later than the committed one.
async fn delivered_once(api: &Api, app: &str, receiver: &Receiver) {
    receiver.wait_for(1).await;
    let message = api.get(&format!("/app/{app}/msg/committed")).await;
    let msg_id = message["id"].as_str().unwrap().to_owned();
    eventually("the attempt is recorded", async || {
        let attempts = api.get(&format!("/app/{app}/attempt/msg/{msg_id}")).await;
        attempts["data"].as_array().unwrap().len() == 1
    })
    .await;
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1, "exactly one delivery");
    assert_eq!(requests[0].header("webhook-id"), msg_id);
    assert_eq!(&requests[0].body[..], br#"{"event": "committed"}"#);
    let messages = api.get(&format!("/app/{app}/msg")).await;
    assert_eq!(messages["data"].as_array().unwrap().len(), 1, "{messages}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_commit_is_delivered_once_and_a_rollback_never() {
    let Some((url, _db)) = fresh_postgres("outbox::postgres_commit").await else {
        return;
    };
    let receiver = Receiver::always(StatusCode::OK).await;
    let hookd = serve(&url);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&receiver.url).await;
    let producer = sqlx::PgPool::connect(&url).await.unwrap();
    let mut tx = producer.begin().await.unwrap();
    event(&app, "rolled-back").insert(&mut *tx).await.unwrap();
    tx.rollback().await.unwrap();
    let mut tx = producer.begin().await.unwrap();
    event(&app, "committed").insert(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();

    delivered_once(&api, &app, &receiver).await;
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM hookd.outbox")
        .fetch_one(&producer)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_commit_on_a_connection_sharing_the_file_is_delivered_once() {
    let (url, _dir) = fresh_sqlite();
    let receiver = Receiver::always(StatusCode::OK).await;
    let hookd = serve(&url);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&receiver.url).await;
    // The application's own connection to hookd's file, as another process would open it.
    let mut producer = rusqlite::Connection::open(url.strip_prefix("sqlite://").unwrap()).unwrap();
    producer.busy_timeout(Duration::from_secs(5)).unwrap();
    let tx = producer.transaction().unwrap();
    event(&app, "rolled-back").insert_sqlite(&tx).unwrap();
    tx.rollback().unwrap();
    let tx = producer.transaction().unwrap();
    event(&app, "committed").insert_sqlite(&tx).unwrap();
    tx.commit().unwrap();

    delivered_once(&api, &app, &receiver).await;
}
