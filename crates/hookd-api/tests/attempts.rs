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

#[tokio::test]
async fn attempts_carry_their_message_with_with_msg() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let ep = api
        .endpoint(&app, json!({"url": "http://example.com", "uid": "e"}))
        .await;
    let ep = ep["id"].as_str().unwrap();
    let mut ids = Vec::new();
    for order in [1, 2] {
        let body = json!({"eventType": "order.shipped", "payload": {"order": order}});
        let (status, msg) = api
            .call(Method::POST, &format!("/app/{app}/msg"), Some(body))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{msg}");
        let id = msg["id"].as_str().unwrap().to_owned();
        api.failed_attempt(&id, ep, "HTTP/1.1 500 Oops\r\n", "")
            .await;
        ids.push(id);
    }
    let api = &api;
    let list = |query: &str| {
        let path = format!("/app/{app}/attempt/endpoint/e{query}");
        async move { api.call(Method::GET, &path, None).await.1 }
    };

    let plain = list("").await;
    assert!(plain["data"][0].get("msg").is_none(), "{plain}");
    let with_msg = list("?with_msg=true").await;
    for attempt in with_msg["data"].as_array().unwrap() {
        assert_eq!(attempt["msg"]["id"], attempt["msgId"], "{attempt}");
        assert_eq!(attempt["msg"]["eventType"], "order.shipped");
    }
    let payloads: Vec<_> = with_msg["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["msg"]["payload"]["order"].clone())
        .collect();
    assert_eq!(
        payloads,
        [json!(2), json!(1)],
        "newest first, each its own message"
    );
    let without_content = list("?with_msg=true&with_content=false").await;
    assert_eq!(without_content["data"][0]["msg"]["payload"], json!({}));

    let by_message = api
        .call(
            Method::GET,
            &format!("/app/{app}/attempt/msg/{}?with_msg=true", ids[0]),
            None,
        )
        .await
        .1;
    assert_eq!(
        by_message["data"][0]["msg"]["id"],
        ids[0].as_str(),
        "{by_message}"
    );
}
