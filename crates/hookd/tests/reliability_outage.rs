//! Promise: a receiver that is down for 40 minutes while 300 events are published gets all 300
//! after it comes back, each signed with its endpoint's secret, each exactly once (nothing
//! crashed, so at-least-once allows no duplicate here), on the default retry schedule.
//!
//! Time does not pass for real. hookd runs with `HOOKD_TEST_CLOCK_OFFSET_FILE` (see
//! `crates/hookd/src/cli/clock.rs`): its clock is the system time plus an offset this test
//! writes, so the real schedule (immediately, 5 s, 5 min, 30 min, 2 h, … with up to +10 %
//! jitter) runs unchanged while the test moves time forward between attempt rounds.
//! "Down" is a closed port: every attempt meets a refused connection until a receiver binds
//! that port again.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use serde_json::{Value, json};
use support::{Api, TestTime, closed_port};
use webhook_signature::{Secret, Verifier};

const TOKEN: &str = "outage-test-admin-token";
const EVENTS: usize = 300;
const MINUTE: u64 = 60_000;

fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Waits (bounded) until the endpoint's delivery log holds `n` attempts, and returns them.
async fn wait_for_attempts(api: &Api, app: &str, endpoint: &str, n: usize) -> Vec<Value> {
    let path = format!("/app/{app}/attempt/endpoint/{endpoint}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let attempts = api.get_all(&path).await;
        if attempts.len() >= n {
            return attempts;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "expected {n} attempts, the log has {}",
            attempts.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn down_for_40_minutes_then_everything_arrives_once(database: &str) {
    let time = TestTime::start();
    let hookd = time.serve_local(database, TOKEN, &["--endpoint-concurrency", "16"]);
    let api = Api::new(&hookd, TOKEN);
    let address = closed_port();
    let app = api
        .app_with_endpoint(&format!("http://{address}/hook"))
        .await;
    let endpoint = api.get(&format!("/app/{app}/endpoint")).await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let secret = api
        .get(&format!("/app/{app}/endpoint/{endpoint}/secret"))
        .await["key"]
        .as_str()
        .unwrap()
        .to_owned();

    let mut published = HashMap::new();
    for n in 0..EVENTS {
        let (status, message) = api
            .post(
                &format!("/app/{app}/msg"),
                json!({"eventType": "order.shipped", "payload": {"order": n}}),
            )
            .await
            .unwrap();
        assert_eq!(status, 202, "{message}");
        published.insert(
            message["id"].as_str().unwrap().to_owned(),
            format!(r#"{{"order":{n}}}"#),
        );
    }

    // While the receiver is down: attempt 1 at once, 2 after 5 s (+10 % jitter at most), 3
    // after 5 min more, 4 after 30 min more — all inside the 40 minutes. Each round is moved
    // to only once the previous one is in the log, so no claim is in flight across a jump.
    wait_for_attempts(&api, &app, &endpoint, EVENTS).await;
    time.set(6_000);
    wait_for_attempts(&api, &app, &endpoint, 2 * EVENTS).await;
    time.set(6_000 + 6 * MINUTE);
    wait_for_attempts(&api, &app, &endpoint, 3 * EVENTS).await;
    time.set(6_000 + 6 * MINUTE + 33 * MINUTE);
    let failed = wait_for_attempts(&api, &app, &endpoint, 4 * EVENTS).await;
    assert!(
        failed
            .iter()
            .all(|a| a["responseStatusCode"] == 0 && a["status"] == 2),
        "every attempt during the outage failed without a response"
    );

    // The receiver comes back at minute 40; attempt 5 is due 2 h (+10 %) after attempt 4.
    time.set(40 * MINUTE);
    let back_at = unix_secs() + 40 * 60;
    let receiver = Receiver::start_at(address, |_| async { StatusCode::NO_CONTENT }).await;
    assert_eq!(
        receiver.count(),
        0,
        "nothing is sent before attempt 5 is due"
    );
    time.set(40 * MINUTE + 136 * MINUTE);
    receiver.wait_for(EVENTS).await;
    let attempts = wait_for_attempts(&api, &app, &endpoint, 5 * EVENTS).await;

    let mut seen = HashMap::new();
    let secret = Secret::parse(&secret).unwrap();
    for request in receiver.requests() {
        let id = request.header("webhook-id").to_owned();
        let body = published
            .get(&id)
            .unwrap_or_else(|| panic!("{id} was never published"));
        assert_eq!(
            &request.body[..],
            body.as_bytes(),
            "the stored bytes, unchanged"
        );
        let timestamp: u64 = request.header("webhook-timestamp").parse().unwrap();
        assert!(
            timestamp >= back_at,
            "sent at {timestamp}, before the receiver came back at {back_at}"
        );
        let headers = ["webhook-id", "webhook-timestamp", "webhook-signature"]
            .map(|n| (n, request.header(n)));
        Verifier::new(secret.clone())
            .now(timestamp)
            .verify(&request.body, headers)
            .expect("signed with the endpoint's secret");
        *seen.entry(id).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), EVENTS, "every published message arrived");
    assert!(
        seen.values().all(|&n| n == 1),
        "no message arrived twice without a crash"
    );
    let successes = attempts.iter().filter(|a| a["status"] == 0).count();
    assert_eq!(
        (attempts.len(), successes),
        (5 * EVENTS, EVENTS),
        "four failed attempts and one success per message"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_down_for_40_minutes_gets_all_300_events_once_on_sqlite() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    down_for_40_minutes_then_everything_arrives_once(&database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_down_for_40_minutes_gets_all_300_events_once_on_postgres() {
    let Some((database, _guard)) = hookd_store::testing::fresh_postgres(
        "a_receiver_down_for_40_minutes_gets_all_300_events_once_on_postgres",
    )
    .await
    else {
        return;
    };
    down_for_40_minutes_then_everything_arrives_once(&database).await;
}
