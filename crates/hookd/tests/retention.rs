//! Retention end to end: the real `hookd serve` purges a delivered message's content once its
//! clock passes `--retention`, and keeps every byte of a message whose delivery is still to do.
//!
//! Time does not pass for real: hookd runs with `HOOKD_TEST_CLOCK_OFFSET_FILE` (see
//! `crates/hookd/src/cli/clock.rs`) and the test moves its clock three days forward.

mod support;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use serde_json::json;
use support::{Api, TestTime, closed_port, wait_until};

const TOKEN: &str = "retention-test-admin-token";
const DAY_MS: u64 = 86_400_000;

async fn delivered_content_goes_after_the_window_and_pending_content_stays(database: &str) {
    let time = TestTime::start();
    let hookd = time.serve_local(
        database,
        TOKEN,
        &["--retention", "2d", "--retention-interval", "1s"],
    );
    let api = Api::new(&hookd, TOKEN);
    // The older message goes to a port nobody listens on: it keeps being retried.
    let down = api
        .app_with_endpoint(&format!("http://{}/hook", closed_port()))
        .await;
    let waiting = api.publish(&down, "order.shipped", json!({"n": 1})).await;
    let receiver = Receiver::always(StatusCode::OK).await;
    let up = api.app_with_endpoint(&receiver.url).await;
    let delivered = api.publish(&up, "order.shipped", json!({"n": 2})).await;
    wait_until(&api, &format!("/app/{up}/msg/{delivered}/endpoint"), |d| {
        d["data"][0]["statusText"] == "success"
    })
    .await;

    time.set(3 * DAY_MS);
    let purged = wait_until(&api, &format!("/app/{up}/msg/{delivered}"), |m| {
        m["payload"] == json!({"expired": true})
    })
    .await;
    assert_eq!(purged["eventType"], "order.shipped", "the record stays");
    let attempts = api.get(&format!("/app/{up}/attempt/msg/{delivered}")).await;
    assert_eq!(attempts["data"], json!([]), "its attempts are purged");

    // The pass that purged the newer message looked at the older one first.
    let kept = api.get(&format!("/app/{down}/msg/{waiting}")).await;
    assert_eq!(
        kept["payload"],
        json!({"n": 1}),
        "a pending delivery keeps its payload"
    );
    let destinations = api
        .get(&format!("/app/{down}/msg/{waiting}/endpoint"))
        .await;
    assert_ne!(destinations["data"][0]["statusText"], "success");
    assert_ne!(destinations["data"][0]["statusText"], "fail");
}

#[tokio::test]
async fn retention_on_sqlite() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    delivered_content_goes_after_the_window_and_pending_content_stays(&url).await;
}

#[tokio::test]
async fn retention_on_postgres() {
    let Some((url, _db)) = hookd_store::testing::fresh_postgres("retention_on_postgres").await
    else {
        return;
    };
    delivered_content_goes_after_the_window_and_pending_content_stays(&url).await;
}
