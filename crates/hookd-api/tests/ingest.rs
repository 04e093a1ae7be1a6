//! The ingest gateway's receive route and source routes over a real SQLite file, on a manual
//! clock: the size limit (413) and the rate limit (429, `Retry-After`, room again a second
//! later) come before anything is checked or kept; an unknown token is 404; a Slack
//! `url_verification` is answered with its challenge and keeps nothing; bad source bodies are
//! 422 naming the field; PUT creates a source at a uid, and a changed key is checked from the
//! next request on; an ordering pointer gives each message its ordering key.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestApi, assert_invalid_field, start_with_clock};
use hookd_api::ApiConfig;
use hookd_core::{ManualClock, Timestamp};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// The clock's start: within a signature's replay window of the Slack request below.
const NOW_SECS: i64 = 1_765_000_000;

/// The server's root (the ingest API is beside `/api/v1`).
fn root(api: &TestApi) -> &str {
    api.base.trim_end_matches("/api/v1")
}

async fn ingest(
    api: &TestApi,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    api.call_at_root(method, &format!("/ingest/api/v1{path}"), body)
        .await
}

/// POSTs `body` with `headers` to `url`: the status, the `Retry-After` and the body's text.
async fn deliver(
    url: &str,
    body: Vec<u8>,
    headers: &[(&str, String)],
) -> (StatusCode, Option<String>, String) {
    let mut request = reqwest::Client::new().post(url).body(body);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, retry, response.text().await.unwrap())
}

/// Where this test server receives for `source` (its `ingestUrl` names `--public-url`, which
/// is not this server's address here).
fn receive_url(api: &TestApi, source: &Value) -> String {
    let url = source["ingestUrl"].as_str().unwrap();
    let token = url.split("/ingest/in/").nth(1).unwrap();
    format!("{}/ingest/in/{token}", root(api))
}

async fn started() -> (TestApi, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(NOW_SECS * 1000)));
    (
        start_with_clock(ApiConfig::default(), clock.clone()).await,
        clock,
    )
}

async fn source(api: &TestApi, body: Value) -> Value {
    let (status, source) = ingest(api, Method::POST, "/source", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{source}");
    source
}

#[tokio::test]
async fn size_and_rate_limits_come_first_and_a_second_later_there_is_room() {
    let (api, clock) = started().await;
    let made = source(
        &api,
        json!({"name": "any", "type": "generic-webhook", "maxBodyBytes": 64, "rateLimit": 2}),
    )
    .await;
    let url = &receive_url(&api, &made);
    let key = |n: u32| vec![("idempotency-key", format!("k{n}"))];

    let (status, _, body) = deliver(url, vec![b'x'; 65], &key(0)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    for n in 1..=2 {
        let (status, _, body) = deliver(url, br#"{"type":"a"}"#.to_vec(), &key(n)).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    let (status, retry, body) = deliver(url, br#"{"type":"a"}"#.to_vec(), &key(3)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(retry.as_deref(), Some("1"));
    clock.advance(Duration::from_secs(1));
    let (status, _, body) = deliver(url, br#"{"type":"a"}"#.to_vec(), &key(3)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    let unknown = format!("{}/ingest/in/0123abcd", root(&api));
    let (status, _, _) = deliver(&unknown, b"{}".to_vec(), &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_slack_challenge_is_answered_and_nothing_is_kept() {
    let (api, _clock) = started().await;
    let made = source(&api, json!({"name": "slack", "type": "slack", "config": {"secret": "8f742231b10e8888abcd99yyyzzz85a5"}})).await;
    let body = br#"{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let signature =
        webhook_signature::slack::sign("8f742231b10e8888abcd99yyyzzz85a5", NOW_SECS as u64, body);
    let headers = [
        ("x-slack-signature", signature),
        ("x-slack-request-timestamp", NOW_SECS.to_string()),
    ];
    let url = &receive_url(&api, &made);
    let (status, _, answer) = deliver(url, body.to_vec(), &headers).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        answer,
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );
    let id = made["id"].as_str().unwrap();
    let (_, requests) = ingest(&api, Method::GET, &format!("/source/{id}/request"), None).await;
    assert_eq!(requests["data"], json!([]), "nothing kept");
}

#[tokio::test]
async fn bad_source_bodies_name_the_field_and_put_creates_at_a_uid() {
    let (api, _clock) = started().await;
    let refused = [
        (
            json!({"name": "x", "type": "hubspot", "config": {"secret": "s"}}),
            "type",
        ),
        (json!({"name": "x", "type": "svix", "config": {}}), "secret"),
        (
            json!({"name": "x", "type": "generic-webhook", "maxBodyBytes": 0}),
            "maxBodyBytes",
        ),
        (
            json!({"name": "x", "type": "generic-webhook", "rateLimit": 0}),
            "rateLimit",
        ),
        (
            json!({"name": "x", "type": "generic-webhook", "uid": "no spaces"}),
            "uid",
        ),
    ];
    for (body, field) in refused {
        let (status, answer) = ingest(&api, Method::POST, "/source", Some(body)).await;
        assert_invalid_field(status, &answer, field);
    }
    let body = json!({"name": "gh", "type": "github", "config": {"secret": "s3cr3t"}});
    let (status, made) = ingest(&api, Method::PUT, "/source/github-main", Some(body.clone())).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(
        (&made["uid"], &made["config"]),
        (&json!("github-main"), &json!({})),
        "no secret shown"
    );
    let (status, _) = ingest(&api, Method::PUT, "/source/src_2mNOpQrStUvWxYz", Some(body)).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "an id names an existing source only"
    );
}

/// Schemes are kept open between requests: a changed source must be checked with its new
/// configuration from the next request on.
#[tokio::test]
async fn a_changed_key_is_checked_from_the_next_request() {
    let (api, _clock) = started().await;
    let with_key = |value: &str| {
        json!({"name": "keyed", "uid": "keyed", "type": "generic-webhook",
               "config": {"apiKey": {"header": "x-api-key", "value": value}}})
    };
    let made = source(&api, with_key("first key")).await;
    let url = receive_url(&api, &made);
    let send = async |key: &str| {
        let headers = [("x-api-key", key.to_owned())];
        deliver(&url, br#"{"n":1}"#.to_vec(), &headers).await.0
    };
    assert_eq!(send("first key").await, StatusCode::ACCEPTED);

    let (status, changed) = ingest(
        &api,
        Method::PUT,
        "/source/keyed",
        Some(with_key("second key")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(send("first key").await, StatusCode::UNAUTHORIZED);
    assert_eq!(send("second key").await, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn an_ordering_pointer_names_each_message_s_ordering_key() {
    let (api, _clock) = started().await;
    let body = json!({
        "name": "stripe-like", "type": "generic-webhook",
        "orderingKeyPointer": "/data/object/customer",
    });
    let made = source(&api, body).await;
    assert_eq!(made["orderingKeyPointer"], "/data/object/customer");
    let url = &receive_url(&api, &made);
    let events = [
        (
            r#"{"type":"a","data":{"object":{"customer":"cus_1"}}}"#,
            json!("cus_1"),
        ),
        (
            r#"{"type":"a","data":{"object":{"customer":42}}}"#,
            json!("42"),
        ),
        (r#"{"type":"a","data":{}}"#, Value::Null),
    ];
    for (n, (body, expected)) in events.into_iter().enumerate() {
        let headers = [("idempotency-key", format!("order-{n}"))];
        let (status, _, answer) = deliver(url, body.as_bytes().to_vec(), &headers).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
        let id = serde_json::from_str::<Value>(&answer).unwrap()["id"].clone();
        let app = format!("hookd-ingest-{}", made["id"].as_str().unwrap());
        let path = format!("/app/{app}/msg/{}", id.as_str().unwrap());
        let (_, message) = api.call(Method::GET, &path, None).await;
        assert_eq!(
            message.get("orderingKey").cloned().unwrap_or(Value::Null),
            expected
        );
    }
    let bad = json!({"name": "x", "type": "generic-webhook", "orderingKeyPointer": "data"});
    let (status, answer) = ingest(&api, Method::POST, "/source", Some(bad)).await;
    assert_invalid_field(status, &answer, "orderingKeyPointer");
}
