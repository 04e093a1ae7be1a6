//! Publishing over real HTTP on loopback and a real SQLite file: bytes kept as sent, routing,
//! idempotency (`eventId`, `Idempotency-Key`), size limits, strict event types, scheduling,
//! and ordering keys (a waiting message names its key's head; skipping the head lets it go).

mod common;

use common::{ADMIN_TOKEN, assert_invalid_field, start, start_default};
use hookd_api::ApiConfig;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[tokio::test]
async fn a_message_is_accepted_with_its_bytes_kept_and_routed() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    api.endpoint(
        &app,
        json!({"url": "http://example.com/a", "uid": "shipped", "eventTypes": ["order.shipped"]}),
    )
    .await;
    api.endpoint(
        &app,
        json!({"url": "http://example.com/b", "uid": "paid", "eventTypes": ["order.paid"]}),
    )
    .await;
    let payload = r#"{"orderId": 1003,  "note": "caf\u00e9 ☕"}"#;
    let raw = format!(r#"{{"eventType": "order.shipped", "payload": {payload}}}"#).into_bytes();
    let (status, msg) = api
        .send(
            Some(ADMIN_TOKEN),
            Method::POST,
            &format!("/app/{app}/msg"),
            Some(raw),
            &[],
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{msg}");
    let id = msg["id"].as_str().unwrap();
    let stored = api
        .store
        .get_message(&hookd_core::AppId::from_stored(app.clone()), id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.payload.unwrap(), payload.as_bytes());

    let (_, destinations) = api
        .call(Method::GET, &format!("/app/{app}/msg/{id}/endpoint"), None)
        .await;
    let routed: Vec<_> = destinations["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["uid"].clone(), d["statusText"].clone()))
        .collect();
    assert_eq!(routed, vec![(json!("shipped"), json!("pending"))]);
    let (_, listed) = api
        .call(
            Method::GET,
            &format!("/app/{app}/msg?event_types=order.shipped"),
            None,
        )
        .await;
    assert_eq!(listed["data"][0]["payload"]["orderId"], 1003);
}

#[tokio::test]
async fn the_publish_answer_shows_the_payload_sent_unless_asked_without_content() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let payload = json!({"orderId": 1004, "lines": [{"sku": "A", "quantity": 2}]});
    let message = json!({"eventType": "order.shipped", "payload": payload});
    let (status, shown) = api
        .call(
            Method::POST,
            &format!("/app/{app}/msg"),
            Some(message.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{shown}");
    assert_eq!(shown["payload"], payload);
    let (status, without) = api
        .call(
            Method::POST,
            &format!("/app/{app}/msg?with_content=false"),
            Some(message),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{without}");
    assert_eq!(without["payload"], json!({}));
    assert_eq!(without["eventType"], "order.shipped");
}

#[tokio::test]
async fn publishing_wakes_the_engine_only_when_deliveries_were_written() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let publish = json!({"eventType": "order.shipped", "payload": {}});
    api.call(
        Method::POST,
        &format!("/app/{app}/msg"),
        Some(publish.clone()),
    )
    .await;
    let woken = tokio::time::timeout(
        std::time::Duration::from_millis(50),
        api.new_work.notified(),
    )
    .await;
    assert!(woken.is_err(), "no endpoint, no wake-up");
    api.endpoint(&app, json!({"url": "http://example.com"}))
        .await;
    api.call(Method::POST, &format!("/app/{app}/msg"), Some(publish))
        .await;
    tokio::time::timeout(std::time::Duration::from_secs(5), api.new_work.notified())
        .await
        .expect("woken");
}

#[tokio::test]
async fn a_repeated_event_id_is_409_and_creates_nothing() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let publish = json!({"eventType": "order.shipped", "eventId": "evt-1", "payload": {"n": 1}});
    assert_eq!(
        api.call(
            Method::POST,
            &format!("/app/{app}/msg"),
            Some(publish.clone())
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    let (status, body) = api
        .call(Method::POST, &format!("/app/{app}/msg"), Some(publish))
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (StatusCode::CONFLICT, json!("conflict"))
    );
    let (_, listed) = api
        .call(Method::GET, &format!("/app/{app}/msg"), None)
        .await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    let (status, by_event_id) = api
        .call(Method::GET, &format!("/app/{app}/msg/evt-1"), None)
        .await;
    assert_eq!(
        (status, by_event_id["eventId"].clone()),
        (StatusCode::OK, json!("evt-1"))
    );
}

#[tokio::test]
async fn oversized_and_non_object_payloads_are_refused() {
    let api = start(ApiConfig {
        max_payload_bytes: 1024,
        allow_http_endpoints: true,
        ..ApiConfig::default()
    })
    .await;
    let app = api.app("Acme", None).await;
    let path = format!("/app/{app}/msg");
    let big = json!({"eventType": "x", "payload": {"blob": "a".repeat(2_000)}});
    let (status, body) = api.call(Method::POST, &path, Some(big)).await;
    assert_eq!(
        (status, body["code"].clone()),
        (StatusCode::PAYLOAD_TOO_LARGE, json!("payload_too_large"))
    );
    let huge = format!(
        r#"{{"eventType": "x", "payload": {{"blob": "{}"}}}}"#,
        "a".repeat(200_000)
    );
    let (status, _) = api
        .send(
            Some(ADMIN_TOKEN),
            Method::POST,
            &path,
            Some(huge.into_bytes()),
            &[],
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let (status, body) = api
        .call(
            Method::POST,
            &path,
            Some(json!({"eventType": "x", "payload": [1, 2]})),
        )
        .await;
    assert_invalid_field(status, &body, "payload");
}

#[tokio::test]
async fn a_message_for_later_waits_pending_until_its_deliver_at() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    api.endpoint(&app, json!({"url": "https://a.example.com/hook"}))
        .await;
    let path = format!("/app/{app}/msg");
    let at = |seconds: i64| {
        let now = hookd_core::Clock::now(&hookd_core::SystemClock);
        hookd_core::Timestamp::from_millis(now.as_millis() + seconds * 1_000).to_rfc3339()
    };
    for refused in [at(-60), at(31 * 86_400), "tomorrow".to_owned()] {
        let later = json!({"eventType": "x", "payload": {}, "deliverAt": refused});
        let (status, body) = api.call(Method::POST, &path, Some(later)).await;
        assert_invalid_field(status, &body, "deliverAt");
    }
    let (_, listed) = api.call(Method::GET, &path, None).await;
    assert_eq!(listed["data"], json!([]), "nothing stored: {listed}");

    let due = at(3_600);
    let later = json!({"eventType": "x", "payload": {}, "deliverAt": due});
    let (status, msg) = api.call(Method::POST, &path, Some(later)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{msg}");
    let (_, destinations) = api
        .call(
            Method::GET,
            &format!("/app/{app}/msg/{}/endpoint", msg["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(msg["deliverAt"], json!(due), "{msg}");
    let destination = &destinations["data"][0];
    assert_eq!(destination["statusText"], "pending", "{destination}");
    assert_eq!(
        destination["nextAttempt"],
        json!(due),
        "due at its deliverAt"
    );
}

#[tokio::test]
async fn strict_mode_refuses_unknown_and_archived_event_types() {
    let api = start(ApiConfig {
        strict_event_types: true,
        ..ApiConfig::default()
    })
    .await;
    let app = api.app("Acme", None).await;
    let publish = |event_type: &str| json!({"eventType": event_type, "payload": {}});
    let (status, body) = api
        .call(
            Method::POST,
            &format!("/app/{app}/msg"),
            Some(publish("order.shipped")),
        )
        .await;
    assert_invalid_field(status, &body, "eventType");
    api.call(
        Method::POST,
        "/event-type",
        Some(json!({"name": "order.shipped", "description": "Shipped"})),
    )
    .await;
    assert_eq!(
        api.call(
            Method::POST,
            &format!("/app/{app}/msg"),
            Some(publish("order.shipped"))
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        api.call(Method::DELETE, "/event-type/order.shipped", None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    let (status, body) = api
        .call(
            Method::POST,
            &format!("/app/{app}/msg"),
            Some(publish("order.shipped")),
        )
        .await;
    assert_invalid_field(status, &body, "eventType");
}

#[tokio::test]
async fn idempotency_key_replays_the_first_response() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let body = br#"{"eventType": "order.shipped", "payload": {"n": 1}}"#.to_vec();
    let headers = [("idempotency-key", "key-1")];
    let path = format!("/app/{app}/msg");
    let (first_status, first) = api
        .send(
            Some(ADMIN_TOKEN),
            Method::POST,
            &path,
            Some(body.clone()),
            &headers,
        )
        .await;
    let (again_status, again) = api
        .send(
            Some(ADMIN_TOKEN),
            Method::POST,
            &path,
            Some(body.clone()),
            &headers,
        )
        .await;
    assert_eq!(
        (first_status, again_status),
        (StatusCode::ACCEPTED, StatusCode::ACCEPTED)
    );
    assert_eq!(first["id"], again["id"]);
    let (_, listed) = api.call(Method::GET, &path, None).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    let (_, other) = api
        .send(
            Some(ADMIN_TOKEN),
            Method::POST,
            &path,
            Some(body),
            &[("idempotency-key", "key-2")],
        )
        .await;
    assert_ne!(other["id"], first["id"]);
}

#[tokio::test]
async fn a_publish_carrying_its_application_makes_it_when_missing() {
    let api = start_default().await;
    let message = |app: serde_json::Value| json!({"eventType": "order.shipped", "payload": {}, "application": app});
    let (status, body) = api
        .call(
            Method::POST,
            "/app/new-shop/msg",
            Some(message(json!({"name": "New Shop", "uid": "new-shop"}))),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (status, app) = api.call(Method::GET, "/app/new-shop", None).await;
    assert_eq!(status, StatusCode::OK, "{app}");
    assert_eq!(app["name"], "New Shop");

    // Existing: the inline application is ignored, the app unchanged.
    let (status, _) = api
        .call(
            Method::POST,
            "/app/new-shop/msg",
            Some(message(json!({"name": "Renamed"}))),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, app) = api.call(Method::GET, "/app/new-shop", None).await;
    assert_eq!(app["name"], "New Shop");
    let (_, listed) = api.call(Method::GET, "/app/new-shop/msg", None).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 2, "{listed}");

    // Without it, a missing application is still a 404; a refused message makes none.
    let plain = json!({"eventType": "order.shipped", "payload": {}});
    let (status, _) = api.call(Method::POST, "/app/other/msg", Some(plain)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let refusals = [
        ("payload", json!([1])),
        ("deliverAt", json!("not a time")),
        ("payloadRetentionPeriod", json!(0)),
    ];
    for (field, value) in refusals {
        let mut bad = message(json!({"name": "Other"}));
        bad[field] = value;
        let (status, body) = api.call(Method::POST, "/app/other/msg", Some(bad)).await;
        assert_invalid_field(status, &body, field);
    }
    let (status, _) = api.call(Method::GET, "/app/other", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn precheck_says_whether_an_enabled_endpoint_would_take_the_message() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let precheck = async |body: serde_json::Value| {
        let (status, answer) = api
            .call(
                Method::POST,
                &format!("/app/{app}/msg/precheck/active"),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        answer["active"].as_bool().unwrap()
    };
    assert!(
        !precheck(json!({"eventType": "order.shipped"})).await,
        "no endpoint"
    );
    api.endpoint(
        &app,
        json!({"url": "https://a.example.com/hook", "filterTypes": ["invoice.paid"]}),
    )
    .await;
    api.endpoint(
        &app,
        json!({"url": "https://b.example.com/hook", "disabled": true}),
    )
    .await;
    api.endpoint(
        &app,
        json!({"url": "https://c.example.com/hook", "channels": ["eu"]}),
    )
    .await;
    assert!(
        precheck(json!({"eventType": "invoice.paid"})).await,
        "its filter takes it"
    );
    assert!(
        !precheck(json!({"eventType": "order.shipped"})).await,
        "only a disabled endpoint, and one for channel eu, would take it"
    );
    assert!(precheck(json!({"eventType": "order.shipped", "channels": ["eu"]})).await);
    let (status, body) = api
        .call(
            Method::POST,
            &format!("/app/{app}/msg/precheck/active"),
            Some(json!({})),
        )
        .await;
    assert_invalid_field(status, &body, "eventType");
}

#[tokio::test]
async fn ordered_messages_wait_behind_their_keys_head_and_a_skip_lets_the_next_go() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let ep = api
        .endpoint(&app, json!({"url": "https://a.example.com/hook"}))
        .await;
    let ep = ep["id"].as_str().unwrap();
    let path = format!("/app/{app}/msg");
    for (key, field) in [
        (json!(""), "orderingKey"),
        (json!("k".repeat(257)), "orderingKey"),
        (json!("a\u{7}b"), "orderingKey"),
    ] {
        let refused = json!({"eventType": "x", "payload": {}, "orderingKey": key});
        let (status, body) = api.call(Method::POST, &path, Some(refused)).await;
        assert_invalid_field(status, &body, field);
    }
    let later = hookd_core::Timestamp::from_millis(
        hookd_core::Clock::now(&hookd_core::SystemClock).as_millis() + 3_600_000,
    );
    let scheduled = json!({"eventType": "x", "payload": {}, "orderingKey": "C-4471",
                           "deliverAt": later.to_rfc3339()});
    let (status, body) = api.call(Method::POST, &path, Some(scheduled)).await;
    assert_invalid_field(status, &body, "deliverAt");

    let mut ids = Vec::new();
    for status in ["in transit", "delivered"] {
        let body = json!({"eventType": "consignment.updated", "orderingKey": "C-4471",
                          "payload": {"status": status}});
        let (code, msg) = api.call(Method::POST, &path, Some(body)).await;
        assert_eq!(code, StatusCode::ACCEPTED, "{msg}");
        assert_eq!(msg["orderingKey"], "C-4471");
        ids.push(msg["id"].as_str().unwrap().to_owned());
    }
    let (_, waiting) = api
        .call(Method::GET, &format!("{path}/{}/endpoint", ids[1]), None)
        .await;
    let waiting = &waiting["data"][0];
    assert_eq!(
        (
            &waiting["statusText"],
            &waiting["nextAttempt"],
            &waiting["waitingBehind"]
        ),
        (&json!("pending"), &Value::Null, &json!(ids[0])),
        "{waiting}"
    );
    let (_, head) = api
        .call(Method::GET, &format!("{path}/{}/endpoint", ids[0]), None)
        .await;
    assert_eq!(head["data"][0].get("waitingBehind"), None, "{head}");

    let skip = |msg: &str| format!("{path}/{msg}/endpoint/{ep}/skip");
    let (status, _) = api.call(Method::POST, &skip(&ids[0]), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = api.call(Method::POST, &skip(&ids[0]), None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (_, next) = api
        .call(Method::GET, &format!("/app/{app}/endpoint/{ep}/msg"), None)
        .await;
    let by_id = |id: &str| {
        next["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(by_id(&ids[0])["statusText"], "fail");
    let second = by_id(&ids[1]);
    assert_eq!(second["statusText"], "pending");
    assert!(second["nextAttempt"].is_string(), "due now: {second}");
    assert_eq!(second.get("waitingBehind"), None);
    let (status, body) = api
        .call(Method::POST, &skip("msg_2MissingMissingMissing0"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

#[tokio::test]
async fn tags_are_kept_shown_and_filtered_by() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let path = format!("/app/{app}/msg");
    for (tags, why) in [
        (json!(["a", "b", "c", "d", "e", "f"]), "six"),
        (json!(["two words"]), "a space"),
        (json!([""]), "empty"),
    ] {
        let body = json!({"eventType": "x", "payload": {}, "tags": tags});
        let (status, answer) = api.call(Method::POST, &path, Some(body)).await;
        assert_invalid_field(status, &answer, "tags");
        assert!(answer.to_string().contains("tags"), "{why}: {answer}");
    }
    let tagged = json!({"eventType": "x", "payload": {}, "tags": ["project/7", "eu"]});
    let (status, msg) = api.call(Method::POST, &path, Some(tagged)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{msg}");
    assert_eq!(msg["tags"], json!(["project/7", "eu"]));
    assert_eq!(msg["deliverAt"], Value::Null);
    let plain = json!({"eventType": "x", "payload": {}});
    let (_, other) = api.call(Method::POST, &path, Some(plain)).await;
    assert_eq!(other["tags"], Value::Null);

    let (_, shown) = api
        .call(
            Method::GET,
            &format!("{path}/{}", msg["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(shown["tags"], json!(["project/7", "eu"]));
    let ids = |list: &Value| -> Vec<String> {
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, found) = api
        .call(Method::GET, &format!("{path}?tag=project/7"), None)
        .await;
    assert_eq!(ids(&found), [msg["id"].as_str().unwrap()]);
    let (_, none) = api.call(Method::GET, &format!("{path}?tag=us"), None).await;
    assert_eq!(ids(&none), Vec::<String>::new());
}
