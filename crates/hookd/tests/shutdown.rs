//! Graceful shutdown of the real binary: on SIGTERM, hookd stops claiming and accepting
//! connections; an attempt in flight that finishes within `--shutdown-grace` is recorded
//! before the process exits; one still hanging at the end of the grace is stopped and its
//! delivery is due again at once (not after its lease), with no attempt recorded. Checked on
//! the database hookd leaves behind, SQLite and PostgreSQL.

mod support;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use hookd_core::model::{Attempt, Delivery, DeliveryStatus};
use hookd_core::{Clock, SystemClock};
use hookd_engine::testing::Receiver;
use hookd_store::PageRequest;
use serde_json::json;
use support::{Api, Hookd, eventually};
use tokio::sync::Semaphore;

const TOKEN: &str = "shutdown-test-admin-token";
/// A bound on "the process exited" that only a hang exceeds.
const EXIT_BOUND: Duration = Duration::from_secs(60);

/// hookd on `database` with `grace`, its log (text, `info`) written to `log`.
fn serve(database: &str, grace: &str, log: &std::path::Path) -> Hookd {
    Hookd::serve_local_with(
        database,
        TOKEN,
        &["--shutdown-grace", grace],
        &[("HOOKD_LOG", "info")],
        Stdio::from(std::fs::File::create(log).unwrap()),
    )
}

/// Publishes one message to a new endpoint at `url`; returns (app, message) ids.
async fn publish(hookd: &Hookd, url: &str) -> (String, String) {
    let api = Api::new(hookd, TOKEN);
    let app = api.app_with_endpoint(url).await;
    let message = api.publish(&app, "order.shipped", json!({"n": 1})).await;
    (app, message)
}

/// SIGTERM, then waits until hookd says it stopped claiming with an attempt in flight.
async fn terminate_mid_attempt(hookd: &Hookd, log: &std::path::Path) {
    hookd.terminate();
    eventually(async || {
        let text = std::fs::read_to_string(log).unwrap();
        match text.contains("stopped claiming; waiting for the attempts in flight") {
            true => Ok(()),
            false => Err(format!("hookd never said it was draining:\n{text}")),
        }
    })
    .await;
}

/// The message's one delivery and its attempts, as stored.
async fn stored(database: &str, app: &str, message: &str) -> (Delivery, Vec<Attempt>) {
    let store = hookd_store::open(database).await.unwrap();
    let app = store.get_app(app).await.unwrap().unwrap();
    let message = store.get_message(&app.id, message).await.unwrap().unwrap();
    let mut deliveries = store
        .list_message_deliveries(&app.id, &message)
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1);
    let page = PageRequest {
        limit: 10,
        cursor: None,
    };
    let attempts = store
        .list_attempts_by_message(&app.id, &message, &Default::default(), &page)
        .await
        .unwrap()
        .items;
    (deliveries.pop().unwrap().1, attempts)
}

async fn an_attempt_finishing_within_the_grace_is_recorded(database: &str) {
    let gate = Arc::new(Semaphore::new(0));
    let held = {
        let gate = gate.clone();
        Receiver::start(move |_| {
            let gate = gate.clone();
            async move {
                let _pass = gate.acquire().await;
                StatusCode::OK
            }
        })
        .await
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let mut hookd = serve(database, "60s", &log);
    let (app, message) = publish(&hookd, &held.url).await;
    held.wait_for(1).await;
    terminate_mid_attempt(&hookd, &log).await;
    // No new connections while draining.
    let base = hookd.base_url.clone();
    eventually(
        async || match reqwest::get(format!("{base}/api/v1/health")).await {
            Err(error) if error.is_connect() => Ok(()),
            other => Err(format!("still accepting connections: {other:?}")),
        },
    )
    .await;
    gate.add_permits(1);
    let status = hookd.exited_within(EXIT_BOUND).await;
    assert!(status.success(), "{status}");

    let (delivery, attempts) = stored(database, &app, &message).await;
    assert_eq!(
        (delivery.status, delivery.attempt_count),
        (DeliveryStatus::Success, 1)
    );
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].response_status_code, 200);
}

async fn an_attempt_hanging_past_the_grace_is_due_again_at_once(database: &str) {
    let hanging = Receiver::start(|_| std::future::pending::<StatusCode>()).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let mut hookd = serve(database, "1s", &log);
    let (app, message) = publish(&hookd, &hanging.url).await;
    hanging.wait_for(1).await;
    terminate_mid_attempt(&hookd, &log).await;
    let status = hookd.exited_within(EXIT_BOUND).await;
    assert!(status.success(), "{status}");

    // Claimed, the delivery was `sending` until its lease's end (90 s later by default);
    // given back, it is pending and already due, with nothing recorded.
    let (delivery, attempts) = stored(database, &app, &message).await;
    assert_eq!(
        (delivery.status, delivery.attempt_count),
        (DeliveryStatus::Pending, 0)
    );
    let due = delivery.next_attempt_at.expect("a due time");
    assert!(due <= SystemClock.now(), "due at {due:?}, after now");
    assert!(attempts.is_empty(), "{attempts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_attempt_finishing_within_the_grace_is_recorded() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    an_attempt_finishing_within_the_grace_is_recorded(&database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_attempt_hanging_past_the_grace_is_due_again_at_once() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    an_attempt_hanging_past_the_grace_is_due_again_at_once(&database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_attempt_finishing_within_the_grace_is_recorded() {
    let test = "shutdown::postgres_an_attempt_finishing_within_the_grace_is_recorded";
    let Some((database, _guard)) = hookd_store::testing::fresh_postgres(test).await else {
        return;
    };
    an_attempt_finishing_within_the_grace_is_recorded(&database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_attempt_hanging_past_the_grace_is_due_again_at_once() {
    let test = "shutdown::postgres_an_attempt_hanging_past_the_grace_is_due_again_at_once";
    let Some((database, _guard)) = hookd_store::testing::fresh_postgres(test).await else {
        return;
    };
    an_attempt_hanging_past_the_grace_is_due_again_at_once(&database).await;
}
