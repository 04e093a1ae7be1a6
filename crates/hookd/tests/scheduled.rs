//! Scheduled delivery end to end (`deliverAt`): the real `hookd serve` keeps a message for
//! later pending, sends nothing before its time, loses nothing to a `kill -9` meanwhile, and
//! delivers it once its time comes (on a clock the test moves; see `TestTime`).

mod support;

use axum::http::StatusCode;
use hookd_core::{Clock, SystemClock, Timestamp};
use hookd_engine::testing::Receiver;
use serde_json::json;
use support::{Api, TestTime, wait_until};

const TOKEN: &str = "scheduled-test-admin-token";
const HOUR_MS: u64 = 3_600_000;

async fn a_message_for_later_survives_kill_9_and_goes_out_on_time(database: &str) {
    let time = TestTime::start();
    let mut hookd = time.serve_local(database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let receiver = Receiver::always(StatusCode::OK).await;
    let app = api.app_with_endpoint(&receiver.url).await;
    let due = Timestamp::from_millis(SystemClock.now().as_millis() + HOUR_MS as i64);
    let (status, msg) = api
        .post(
            &format!("/app/{app}/msg"),
            json!({"eventType": "order.shipped", "payload": {"n": 1}, "deliverAt": due.to_rfc3339()}),
        )
        .await
        .unwrap();
    assert_eq!(status, 202, "{msg}");
    let msg = msg["id"].as_str().unwrap().to_owned();
    // The engine claims every second: two polls later it still has not sent it.
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    assert_eq!(receiver.count(), 0, "nothing before its time");
    let destinations = api.get(&format!("/app/{app}/msg/{msg}/endpoint")).await;
    assert_eq!(destinations["data"][0]["statusText"], "pending");

    hookd.kill_hard();
    time.set(2 * HOUR_MS);
    let hookd = time.serve_local(database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    wait_until(&api, &format!("/app/{app}/msg/{msg}/endpoint"), |d| {
        d["data"][0]["statusText"] == "success"
    })
    .await;
    let received = receiver.requests();
    assert_eq!(received.len(), 1, "sent once");
    assert_eq!(received[0].header("webhook-id"), msg);
}

#[tokio::test]
async fn scheduled_on_sqlite() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    a_message_for_later_survives_kill_9_and_goes_out_on_time(&url).await;
}

#[tokio::test]
async fn scheduled_on_postgres() {
    let Some((url, _db)) = hookd_store::testing::fresh_postgres("scheduled_on_postgres").await
    else {
        return;
    };
    a_message_for_later_survives_kill_9_and_goes_out_on_time(&url).await;
}
