//! Retention end to end: the real `hookd serve` purges a delivered message's content once its
//! clock passes `--retention`, deletes its record once it passes `--keep-records` (its
//! `eventId` staying taken until `--keep-event-ids`), and keeps every byte of a message whose
//! delivery is still to do; `/metrics` counts what went.
//!
//! Time does not pass for real: hookd runs with `HOOKD_TEST_CLOCK_OFFSET_FILE` (see
//! `crates/hookd/src/cli/clock.rs`) and the test moves its clock forward by days.

mod support;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use serde_json::json;
use support::{Api, TestTime, closed_port, eventually, wait_until};

const TOKEN: &str = "retention-test-admin-token";
const DAY_MS: u64 = 86_400_000;

async fn delivered_content_then_its_record_go_and_pending_content_stays(database: &str) {
    let time = TestTime::start();
    let hookd = time.serve_local(
        database,
        TOKEN,
        &[
            "--retention",
            "2d",
            "--keep-records",
            "4d",
            "--keep-event-ids",
            "10d",
            "--retention-interval",
            "1s",
        ],
    );
    let api = Api::new(&hookd, TOKEN);
    // The older message goes to a port nobody listens on: it keeps being retried.
    let down = api
        .app_with_endpoint(&format!("http://{}/hook", closed_port()))
        .await;
    let waiting = api.publish(&down, "order.shipped", json!({"n": 1})).await;
    let receiver = Receiver::always(StatusCode::OK).await;
    let up = api.app_with_endpoint(&receiver.url).await;
    let publish_evt_42 = async || {
        let message = json!({"eventType": "order.shipped", "eventId": "evt-42", "payload": {}});
        api.post(&format!("/app/{up}/msg"), message).await.unwrap()
    };
    let (status, first) = publish_evt_42().await;
    assert_eq!(status, 202, "{first}");
    let delivered = first["id"].as_str().unwrap().to_owned();
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
    assert_eq!(api.get_all(&format!("/app/{up}/msg")).await.len(), 1);

    time.set(5 * DAY_MS);
    wait_until(&api, &format!("/app/{up}/msg"), |page| {
        page["data"] == json!([])
    })
    .await;
    let (status, again) = publish_evt_42().await;
    assert_eq!(
        status, 409,
        "the deleted record's eventId stays taken: {again}"
    );
    let kept = api.get(&format!("/app/{down}/msg/{waiting}")).await;
    assert_eq!(
        kept["payload"],
        json!({"n": 1}),
        "the pending one keeps all"
    );
    let metrics = reqwest::get(format!("{}/metrics", hookd.base_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |name: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(name));
        let line = line.unwrap_or_else(|| panic!("no {name} in /metrics:\n{metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value(r#"hookd_retention_rows_deleted_total{table="messages"}"#) >= 1.0);
    assert!(value(r#"hookd_retention_rows_deleted_total{table="deliveries"}"#) >= 1.0);
    assert!(value("hookd_retention_payloads_purged_total") >= 1.0);
    assert!(value("hookd_database_size_bytes") > 0.0);

    time.set(11 * DAY_MS);
    eventually(async || match publish_evt_42().await {
        (202, _) => Ok(()),
        (status, answer) => Err(format!("the eventId was never released: {status} {answer}")),
    })
    .await;
}

#[tokio::test]
async fn retention_on_sqlite() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    delivered_content_then_its_record_go_and_pending_content_stays(&url).await;
}

#[tokio::test]
async fn retention_on_postgres() {
    let Some((url, _db)) = hookd_store::testing::fresh_postgres("retention_on_postgres").await
    else {
        return;
    };
    delivered_content_then_its_record_go_and_pending_content_stays(&url).await;
}
