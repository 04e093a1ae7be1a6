//! Expunging and retention over real HTTP on loopback and a real SQLite file: Svix's
//! `DELETE …/content` endpoints for a message's payload and an attempt's response, what the
//! views show afterwards, app-scoped tokens, and `payloadRetentionPeriod`.

mod common;

use std::time::Duration;

use common::{TestApi, assert_invalid_field, start_default};
use hookd_core::{AppId, Clock, SystemClock};
use hookd_store::{PurgeCursor, PurgeRequest};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// An application with one endpoint and one message; returns (app, endpoint id, message id).
async fn published(api: &TestApi, body: Value) -> (String, String, String) {
    let app = api.app("Acme", None).await;
    let ep = api
        .endpoint(&app, json!({"url": "http://127.0.0.1:9/hook"}))
        .await;
    let (status, msg) = api
        .call(Method::POST, &format!("/app/{app}/msg"), Some(body))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{msg}");
    let ep = ep["id"].as_str().unwrap().to_owned();
    (app, ep, msg["id"].as_str().unwrap().to_owned())
}

fn order() -> Value {
    json!({"eventType": "order.shipped", "payload": {"card": "4242"}})
}

#[tokio::test]
async fn expunging_a_message_drops_its_payload_and_it_shows_as_expired() {
    let api = start_default().await;
    let (app, ep, msg) = published(&api, order()).await;
    let path = format!("/app/{app}/msg/{msg}/content");

    let (status, body) = api.call(Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(body, Value::Null, "204 has no body");
    let stored = api
        .store
        .get_message(&AppId::from_stored(app.clone()), &msg)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.payload, None, "the bytes are gone from the database");

    let (_, shown) = api
        .call(Method::GET, &format!("/app/{app}/msg/{msg}"), None)
        .await;
    assert_eq!(
        shown["payload"],
        json!({"expired": true}),
        "as Svix shows it"
    );
    assert_eq!(shown["eventType"], "order.shipped", "the record stays");
    let (_, listed) = api
        .call(Method::GET, &format!("/app/{app}/msg"), None)
        .await;
    assert_eq!(listed["data"][0]["payload"], json!({"expired": true}));
    let (_, without) = api
        .call(
            Method::GET,
            &format!("/app/{app}/msg/{msg}?with_content=false"),
            None,
        )
        .await;
    assert_eq!(without["payload"], json!({}));

    let (status, body) = api
        .call(
            Method::POST,
            &format!("/app/{app}/msg/{msg}/endpoint/{ep}/resend"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("expunged"),
        "{body}"
    );

    let (status, again) = api.call(Method::DELETE, &path, None).await;
    assert_eq!(
        status,
        StatusCode::NO_CONTENT,
        "expunging twice is harmless: {again}"
    );
}

#[tokio::test]
async fn expunging_an_attempt_drops_its_response_body_and_head() {
    let api = start_default().await;
    let (app, ep, msg) = published(&api, order()).await;
    let head = "HTTP/1.1 500\r\nset-cookie: session=secret\r\n";
    let attempt = api
        .failed_attempt(&msg, &ep, head, "password=hunter2")
        .await;
    let path = format!("/app/{app}/msg/{msg}/attempt/{attempt}");

    let (status, body) = api
        .call(Method::DELETE, &format!("{path}/content"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (_, shown) = api.call(Method::GET, &path, None).await;
    assert_eq!(shown["response"], "EXPUNGED", "Svix's word: {shown}");
    assert_eq!(shown["responseHead"], "", "the headers go too: {shown}");
    assert_eq!(shown["responseStatusCode"], 500, "the outcome stays");
    let (_, listed) = api
        .call(Method::GET, &format!("/app/{app}/attempt/msg/{msg}"), None)
        .await;
    assert_eq!(listed["data"][0]["response"], "EXPUNGED");
    let (_, message) = api
        .call(Method::GET, &format!("/app/{app}/msg/{msg}"), None)
        .await;
    assert_eq!(
        message["payload"],
        json!({"card": "4242"}),
        "the message keeps its payload"
    );
}

#[tokio::test]
async fn expunging_what_does_not_exist_is_404_naming_it() {
    let api = start_default().await;
    let (app, _, msg) = published(&api, order()).await;
    let cases = [
        (
            "/app/app_nope/msg/msg_nope/content".to_owned(),
            "application",
        ),
        (format!("/app/{app}/msg/msg_nope/content"), "message"),
        (
            format!("/app/{app}/msg/{msg}/attempt/atmpt_nope/content"),
            "attempt",
        ),
    ];
    for (path, missing) in cases {
        let (status, body) = api.call(Method::DELETE, &path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert_eq!(body["code"], "not_found");
        assert_eq!(body["detail"], format!("{missing} not found"), "{path}");
    }
}

#[tokio::test]
async fn only_the_provider_expunges_an_app_scoped_token_not_even_its_own() {
    let api = start_default().await;
    let (own_app, _, own_msg) = published(&api, order()).await;
    let token = api.app_token(&own_app).await;

    let own = format!("/app/{own_app}/msg/{own_msg}/content");
    let (status, body) = api.call_as(Some(&token), Method::DELETE, &own, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let kept = api
        .store
        .get_message(&AppId::from_stored(own_app), &own_msg)
        .await
        .unwrap()
        .unwrap();
    assert!(kept.payload.is_some(), "the payload is untouched");
    let (status, body) = api.call(Method::DELETE, &own, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
}

#[tokio::test]
async fn payload_retention_period_is_checked_and_sets_the_messages_own_expiry() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let path = format!("/app/{app}/msg");
    let publish = |body: Value| api.call(Method::POST, &path, Some(body));
    for bad in [json!(0), json!(3651), json!(-5)] {
        let (status, body) = publish(json!({
            "eventType": "order.shipped", "payload": {}, "payloadRetentionPeriod": bad
        }))
        .await;
        assert_invalid_field(status, &body, "payloadRetentionPeriod");
    }
    let (status, body) = publish(json!({
        "eventType": "order.shipped", "payload": {},
        "payloadRetentionPeriod": 5, "payloadRetentionHours": 5
    }))
    .await;
    assert_invalid_field(status, &body, "payloadRetentionHours");

    let (status, short) = publish(json!({
        "eventType": "order.shipped", "payload": {"n": 1}, "payloadRetentionPeriod": 5
    }))
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{short}");
    let (_, plain) = publish(json!({"eventType": "order.shipped", "payload": {"n": 2}})).await;

    // Six days on, with a 30-day window: the message's own 5 days have run out, the window has
    // not. (No endpoint: nothing is left to deliver, both are settled.)
    let now = SystemClock.now().plus(Duration::from_secs(6 * 86_400));
    let request = |cursor| PurgeRequest {
        now,
        window_start: now.minus(Duration::from_secs(30 * 86_400)),
        records_before: None,
        event_ids_before: now,
        limit: 100,
        cursor,
    };
    let window = api
        .store
        .purge_batch(&request(PurgeCursor::default()))
        .await
        .unwrap();
    let expiry = api
        .store
        .purge_batch(&request(window.next.clone().unwrap()))
        .await
        .unwrap();
    assert_eq!(window.messages + expiry.messages, 1);
    assert_eq!(payload(&api, &app, &short).await, json!({"expired": true}));
    assert_eq!(payload(&api, &app, &plain).await, json!({"n": 2}));
}

/// The payload the API shows for a message.
async fn payload(api: &TestApi, app: &str, message: &Value) -> Value {
    let path = format!("/app/{app}/msg/{}", message["id"].as_str().unwrap());
    api.call(Method::GET, &path, None).await.1["payload"].clone()
}
