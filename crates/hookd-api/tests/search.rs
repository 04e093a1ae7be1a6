//! The delivery log's search and an endpoint's statistics over real HTTP on loopback and a
//! real SQLite file: messages by delivery status, the stats of the last day, an endpoint's
//! health over the last day and week (on PostgreSQL too), and the errors that name a bad
//! parameter.

mod common;

use common::{TestApi, assert_invalid_field, start_default, start_default_on_each_backend};
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

/// A failed attempt of `msg` to `ep` (the endpoint as the API shows it).
async fn fail(api: &TestApi, msg: &str, ep: &Value) {
    let head = "HTTP/1.1 500 Internal Server Error\r\n";
    let ep = ep["id"].as_str().unwrap();
    api.failed_attempt(msg, ep, head, "down").await;
}

/// Asserts that another application's token gets `path` as a missing endpoint.
async fn hidden_from_another_app(api: &TestApi, path: &str) {
    let other = api.app("Other", None).await;
    let stranger = api.app_token(&other).await;
    let (status, _) = api.call_as(Some(&stranger), Method::GET, path, None).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another application's endpoint"
    );
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
    fail(&api, &shipped, &ep).await;

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
    fail(&api, &first, &ep).await;

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

    hidden_from_another_app(&api, &path).await;
}

#[tokio::test]
async fn endpoint_health_buckets_the_day_and_the_week_and_names_the_oldest_waiting_message() {
    for api in start_default_on_each_backend("endpoint_health").await {
        let app = api.app("Acme", None).await;
        let ep = api
            .endpoint(&app, json!({"url": "http://example.com", "uid": "orders"}))
            .await;
        let failed = publish(&api, &app, "order.shipped").await;
        let waiting = publish(&api, &app, "order.shipped").await;
        fail(&api, &failed, &ep).await;

        let path = format!("/app/{app}/endpoint/orders/health");
        let (status, health) = api.call(Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{health}");
        assert_eq!(health["disabled"], false, "{health}");
        assert_eq!(
            health["oldestPending"]["msgId"],
            waiting.as_str(),
            "{health}"
        );
        for (window, buckets, seconds) in [("day", 24, 3600), ("week", 28, 6 * 3600)] {
            let shown = &health[window];
            assert_eq!(shown["bucketSeconds"], seconds, "{window}: {shown}");
            let list = shown["buckets"].as_array().unwrap();
            assert_eq!(list.len(), buckets, "{window}");
            let total = |field: &str| list.iter().map(|b| b[field].as_u64().unwrap()).sum();
            let totals: (u64, u64, u64) = (total("success"), total("failure"), total("pending"));
            assert_eq!(totals, (0, 1, 1), "{window}: {shown}");
            assert_eq!(list[0]["start"], shown["since"], "{window}");
            assert_eq!(shown["attempts"], 1, "{window}");
            assert_eq!(shown["successRate"], 0.0, "{window}");
            assert_eq!(shown["pending"], 1, "{window}");
        }

        hidden_from_another_app(&api, &path).await;
        let own = api.app_token(&app).await;
        let (status, mine) = api.call_as(Some(&own), Method::GET, &path, None).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "the customer's own endpoint: {mine}"
        );
    }
}
