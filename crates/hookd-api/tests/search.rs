//! The delivery log's search and an endpoint's statistics over real HTTP on loopback and a
//! real SQLite file: messages by delivery status, the stats of the last day, and the errors
//! that name a bad parameter; and `whoami`, which tells a token its scope.

mod common;

use common::{TestApi, assert_invalid_field, start_default};
use hookd_core::model::{Attempt, Delivery, DeliveryStatus, TriggerType};
use hookd_core::{AttemptId, Clock, EndpointId, MessageId, SystemClock};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// Publishes one message to `app` and returns its id.
async fn publish(api: &TestApi, app: &str, event_type: &str) -> String {
    let (status, msg) = api
        .call(
            Method::POST,
            &format!("/app/{app}/msg"),
            Some(json!({"eventType": event_type, "payload": {"n": 1}})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{msg}");
    msg["id"].as_str().unwrap().to_owned()
}

/// Records a failed attempt of `msg` to `ep` that ends its delivery as failed.
async fn fail(api: &TestApi, msg: &str, ep: &str) {
    let now = SystemClock.now();
    let (message_id, endpoint_id) = (
        MessageId::from_stored(msg.to_owned()),
        EndpointId::from_stored(ep.to_owned()),
    );
    let attempt = Attempt {
        id: AttemptId::new(now),
        message_id: message_id.clone(),
        endpoint_id: endpoint_id.clone(),
        url: "http://example.com".into(),
        response_status_code: 500,
        response: "down".into(),
        response_head: "HTTP/1.1 500 Internal Server Error\r\n".into(),
        response_duration_ms: 7,
        status: DeliveryStatus::Fail,
        trigger_type: TriggerType::Scheduled,
        created_at: now,
    };
    let failed = Delivery {
        message_id,
        endpoint_id,
        status: DeliveryStatus::Fail,
        attempt_count: 1,
        next_attempt_at: None,
        updated_at: now,
    };
    api.store.record_attempt(&attempt, &failed).await.unwrap();
}

fn ids(list: &Value) -> Vec<&str> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn messages_are_found_by_delivery_status_and_event_type() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let ep = api
        .endpoint(&app, json!({"url": "http://example.com"}))
        .await;
    let shipped = publish(&api, &app, "order.shipped").await;
    let paid = publish(&api, &app, "order.paid").await;
    fail(&api, &shipped, ep["id"].as_str().unwrap()).await;

    let search = |query: &str| {
        let path = format!("/app/{app}/msg?{query}");
        let api = &api;
        async move { api.call(Method::GET, &path, None).await }
    };
    let (status, failed) = search("status=2").await;
    assert_eq!(status, StatusCode::OK, "{failed}");
    assert_eq!(ids(&failed), vec![shipped.as_str()]);
    let (_, pending) = search("status=1").await;
    assert_eq!(ids(&pending), vec![paid.as_str()]);
    let (_, none) = search("status=2&event_types=order.paid").await;
    assert_eq!(ids(&none), Vec::<&str>::new());

    let (status, body) = search("status=7").await;
    assert_invalid_field(status, &body, "status");
}

#[tokio::test]
async fn endpoint_stats_count_the_last_day_and_give_a_success_rate() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let ep = api
        .endpoint(&app, json!({"url": "http://example.com", "uid": "orders"}))
        .await;
    let first = publish(&api, &app, "order.shipped").await;
    publish(&api, &app, "order.shipped").await;
    fail(&api, &first, ep["id"].as_str().unwrap()).await;

    let path = format!("/app/{app}/endpoint/orders/stats");
    let (status, stats) = api.call(Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    for (field, value) in [
        ("success", json!(0)),
        ("pending", json!(1)),
        ("sending", json!(0)),
        ("fail", json!(1)),
        ("canceled", json!(0)),
        ("attempts", json!(1)),
        ("successfulAttempts", json!(0)),
        ("successRate", json!(0.0)),
    ] {
        assert_eq!(stats[field], value, "{field} in {stats}");
    }

    let (_, earlier) = api
        .call(
            Method::GET,
            &format!("{path}?since=2020-01-01T00:00:00Z&until=2020-01-02T00:00:00Z"),
            None,
        )
        .await;
    assert_eq!(earlier["pending"], 0, "{earlier}");
    assert_eq!(earlier["successRate"], Value::Null, "{earlier}");

    let (status, body) = api
        .call(
            Method::GET,
            &format!("{path}?since=2020-01-02T00:00:00Z&until=2020-01-01T00:00:00Z"),
            None,
        )
        .await;
    assert_invalid_field(status, &body, "since");

    let other = api.app("Other", None).await;
    let stranger = api.app_token(&other).await;
    let (status, _) = api.call_as(Some(&stranger), Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn whoami_tells_a_token_its_scope() {
    let api = start_default().await;
    let (status, admin) = api.call(Method::GET, "/auth/whoami", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(admin, json!({"scope": "admin", "appId": null}));
    let app = api.app("Acme", None).await;
    let token = api.app_token(&app).await;
    let (_, scoped) = api
        .call_as(Some(&token), Method::GET, "/auth/whoami", None)
        .await;
    assert_eq!(scoped, json!({"scope": "app", "appId": app}));
    let (status, _) = api
        .call_as(Some("nobody"), Method::GET, "/auth/whoami", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
