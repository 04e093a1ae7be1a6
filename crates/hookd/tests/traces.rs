//! Traces end to end: the real `hookd serve --otlp-endpoint` exports its spans over OTLP/HTTP
//! to a real receiver (`scripts/crosscheck/otlp_receiver.py`, which decodes them with the
//! `opentelemetry-proto` package): a publish inside its request's trace, and the attempt of
//! the same message, joined by `hookd.message_id`, whose delivery carried its `traceparent`;
//! no payload in any of them.

mod support;

use axum::http::StatusCode;
use hookd_engine::testing::{Receiver, python};
use serde_json::{Value, json};
use support::process::crosscheck_server;
use support::{Api, Hookd, eventually, wait_until};

const TOKEN: &str = "traces-test-admin-token";
const SECRET_IN_PAYLOAD: &str = "s3cr3t-in-the-payload";

#[tokio::test]
async fn publishes_and_attempts_reach_an_otlp_receiver() {
    let Some(python) = python() else { return };
    let collector = crosscheck_server(&python, "otlp_receiver.py");
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local_with_env(
        &database,
        TOKEN,
        &["--otlp-endpoint", &collector.url, "--otlp-traceparent"],
        // Export every 200 ms rather than every 5 s.
        &[("OTEL_BSP_SCHEDULE_DELAY", "200")],
    );
    let api = Api::new(&hookd, TOKEN);
    let receiver = Receiver::always(StatusCode::OK).await;
    let app = api.app_with_endpoint(&receiver.url).await;
    let msg = api
        .publish(&app, "order.shipped", json!({"note": SECRET_IN_PAYLOAD}))
        .await;
    wait_until(&api, &format!("/app/{app}/msg/{msg}/endpoint"), |d| {
        d["data"][0]["statusText"] == "success"
    })
    .await;

    let of_message = |span: &Value| span["attributes"]["hookd.message_id"] == msg.as_str();
    let spans = eventually(async || {
        let spans: Vec<Value> = collector
            .output()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        let named = |name: &str| spans.iter().any(|s| s["name"] == name && of_message(s));
        match named("publish") && named("attempt") {
            true => Ok(spans),
            false => Err(format!("a publish and an attempt span expected: {spans:?}")),
        }
    })
    .await;
    let find = |name: &str| {
        spans
            .iter()
            .find(|s| s["name"] == name && of_message(s))
            .unwrap()
    };
    let (publish, attempt) = (find("publish"), find("attempt"));
    assert_eq!(publish["service"], "hookd");
    assert_eq!(publish["attributes"]["hookd.app_id"], app.as_str());
    assert_eq!(publish["attributes"]["hookd.event_type"], "order.shipped");
    let request = spans
        .iter()
        .find(|s| s["span_id"] == publish["parent_span_id"])
        .expect("the publish's parent span, its request");
    assert_eq!(request["name"], "request");
    assert_eq!(request["trace_id"], publish["trace_id"], "one trace");
    assert_eq!(attempt["attributes"]["http.response.status_code"], 200);
    assert_eq!(attempt["attributes"]["hookd.outcome"], "2xx");
    assert!(
        attempt["attributes"]["hookd.attempt_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("atmpt_")),
        "{attempt}"
    );
    let delivered = &receiver.requests()[0];
    let traceparent = format!(
        "00-{}-{}-01",
        attempt["trace_id"].as_str().unwrap(),
        attempt["span_id"].as_str().unwrap()
    );
    assert_eq!(
        delivered.header("traceparent"),
        traceparent,
        "the receiver can join"
    );
    assert!(
        !collector.output().contains(SECRET_IN_PAYLOAD),
        "no payload in any span"
    );
}
