//! Attempts over real HTTP on loopback and a real SQLite file: what an endpoint's attempt list
//! shows of the receiver's answer.

mod common;

use common::start_default;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn attempts_show_the_response_head() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let ep = api
        .endpoint(&app, json!({"url": "http://example.com", "uid": "e"}))
        .await;
    let (status, msg) = api
        .call(
            Method::POST,
            &format!("/app/{app}/msg"),
            Some(json!({"eventType": "order.shipped", "payload": {}})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{msg}");
    let head = "HTTP/1.1 500 Internal Server Error\r\nretry-after: 30\r\n";
    let (msg, ep) = (msg["id"].as_str().unwrap(), ep["id"].as_str().unwrap());
    api.failed_attempt(msg, ep, head, "busy").await;
    let (_, attempts) = api
        .call(Method::GET, &format!("/app/{app}/attempt/endpoint/e"), None)
        .await;
    assert_eq!(attempts["data"][0]["responseHead"], head);
    assert_eq!(attempts["data"][0]["response"], "busy");
}
