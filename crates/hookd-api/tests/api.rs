//! The v1 API over real HTTP on loopback and a real SQLite file.

mod common;

use common::{ADMIN_TOKEN, assert_invalid_field, start, start_default};
use hookd_api::ApiConfig;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[tokio::test]
async fn health_needs_no_token_but_everything_else_does() {
    let api = start_default().await;
    assert_eq!(
        api.call_as(None, Method::GET, "/health", None).await.0,
        StatusCode::NO_CONTENT
    );
    let (status, body) = api.call_as(None, Method::GET, "/app", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["code"], "authentication_failed");
    let (status, _) = api.call_as(Some("wrong"), Method::GET, "/app", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(api.call(Method::GET, "/app", None).await.0, StatusCode::OK);
}

#[tokio::test]
async fn applications_are_created_read_updated_patched_and_deleted() {
    let api = start_default().await;
    let id = api.app("Acme", Some("acme")).await;
    let (status, by_uid) = api.call(Method::GET, "/app/acme", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(by_uid["id"], id.as_str());
    assert_eq!(by_uid["metadata"], json!({}));

    let (status, put) = api
        .call(
            Method::PUT,
            &format!("/app/{id}"),
            Some(json!({"name": "Acme Inc", "uid": "acme", "metadata": {"plan": "pro"}})),
        )
        .await;
    assert_eq!(
        (status, put["name"].clone()),
        (StatusCode::OK, json!("Acme Inc"))
    );
    let (_, patched) = api
        .call(Method::PATCH, "/app/acme", Some(json!({"throttleRate": 5})))
        .await;
    assert_eq!(patched["throttleRate"], 5);
    assert_eq!(patched["metadata"], json!({"plan": "pro"}));

    let (status, created) = api
        .call(
            Method::PUT,
            "/app/new-uid",
            Some(json!({"name": "Upserted"})),
        )
        .await;
    assert_eq!(
        (status, created["uid"].clone()),
        (StatusCode::CREATED, json!("new-uid"))
    );

    assert_eq!(
        api.call(Method::DELETE, "/app/acme", None).await.0,
        StatusCode::NO_CONTENT
    );
    let (status, body) = api.call(Method::GET, "/app/acme", None).await;
    assert_eq!(
        (status, body["code"].clone()),
        (StatusCode::NOT_FOUND, json!("not_found"))
    );
}

#[tokio::test]
async fn get_if_exists_returns_the_existing_application() {
    let api = start_default().await;
    let id = api.app("Acme", Some("acme")).await;
    let (status, body) = api
        .call(
            Method::POST,
            "/app?get_if_exists=true",
            Some(json!({"name": "Acme", "uid": "acme"})),
        )
        .await;
    assert_eq!((status, body["id"].clone()), (StatusCode::OK, json!(id)));
    let (status, body) = api
        .call(
            Method::POST,
            "/app",
            Some(json!({"name": "Acme", "uid": "acme"})),
        )
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (StatusCode::CONFLICT, json!("conflict"))
    );
}

#[tokio::test]
async fn lists_page_with_iterators_until_done() {
    let api = start_default().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(api.app(&format!("app {i}"), None).await);
    }
    let mut seen = Vec::new();
    let mut iterator = String::new();
    loop {
        let (_, page) = api
            .call(
                Method::GET,
                &format!("/app?limit=2&iterator={iterator}"),
                None,
            )
            .await;
        seen.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["id"].as_str().unwrap().to_owned()),
        );
        if page["done"] == json!(true) {
            break;
        }
        iterator = page["iterator"].as_str().unwrap().to_owned();
    }
    assert_eq!(seen, ids);
    let (status, body) = api.call(Method::GET, "/app?limit=1000", None).await;
    assert_invalid_field(status, &body, "limit");
}

#[tokio::test]
async fn bad_bodies_get_a_4xx_that_names_the_problem() {
    let api = start_default().await;
    let (status, body) = api
        .call(Method::POST, "/app", Some(json!({"uid": "x"})))
        .await;
    assert_invalid_field(status, &body, "name");
    let (status, body) = api
        .call(Method::POST, "/app", Some(json!({"name": 5})))
        .await;
    assert_invalid_field(status, &body, "name");
    let (status, body) = api
        .call(
            Method::POST,
            "/app",
            Some(json!({"name": "x", "uid": "has space"})),
        )
        .await;
    assert_invalid_field(status, &body, "uid");

    let malformed: [&[u8]; 4] = [
        b"{\"name\": ",
        b"not json",
        b"{\"name\": \"\xff\xfe\"}",
        b"",
    ];
    for bytes in malformed {
        let (status, body) = api
            .send(
                Some(ADMIN_TOKEN),
                Method::POST,
                "/app",
                Some(bytes.to_vec()),
                &[],
            )
            .await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{:?} gave {body}",
            String::from_utf8_lossy(bytes)
        );
        assert_eq!(body["code"], "bad_request");
    }
    let deep = format!(
        "{{\"name\": \"x\", \"metadata\": {}{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let (status, _) = api
        .send(
            Some(ADMIN_TOKEN),
            Method::POST,
            "/app",
            Some(deep.into_bytes()),
            &[],
        )
        .await;
    assert!(status.is_client_error(), "deep nesting gave {status}");
}

#[tokio::test]
async fn unknown_routes_and_methods_are_4xx_json() {
    let api = start_default().await;
    let (status, body) = api.call(Method::GET, "/nothing-here", None).await;
    assert_eq!(
        (status, body["code"].clone()),
        (StatusCode::NOT_FOUND, json!("not_found"))
    );
    let (status, body) = api.call(Method::DELETE, "/app", None).await;
    assert!(status.is_client_error(), "{status} {body}");
    assert!(body["code"].is_string());
}

#[tokio::test]
async fn endpoints_validate_url_headers_and_secret() {
    let api = start(ApiConfig::default()).await;
    let app = api.app("Acme", None).await;
    let path = format!("/app/{app}/endpoint");
    for (body, field) in [
        (json!({"url": "http://example.com/hook"}), "url"),
        (json!({"url": "ftp://example.com/hook"}), "url"),
        (json!({"url": "https://user:pw@example.com/hook"}), "url"),
        (
            json!({"url": "https://example.com", "headers": {"Webhook-Id": "x"}}),
            "Webhook-Id",
        ),
        (
            json!({"url": "https://example.com", "headers": {"host": "x"}}),
            "host",
        ),
        (
            json!({"url": "https://example.com", "secret": "whsec_c2hvcnQ="}),
            "secret",
        ),
        (
            json!({"url": "https://example.com", "eventTypes": ["bad name"]}),
            "eventTypes",
        ),
    ] {
        let (status, out) = api.call(Method::POST, &path, Some(body.clone())).await;
        assert_invalid_field(status, &out, field);
    }
    let created = api
        .endpoint(
            &app,
            json!({"url": "https://example.com/hook", "uid": "main"}),
        )
        .await;
    assert_eq!(created["disabled"], false);
    let (_, secret) = api
        .call(Method::GET, &format!("{path}/main/secret"), None)
        .await;
    let key = secret["key"].as_str().unwrap();
    assert!(key.starts_with("whsec_"), "{key}");
    webhook_signature::Secret::parse_endpoint(key)
        .expect("a generated secret is a valid endpoint secret");

    let own = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    api.endpoint(
        &app,
        json!({"url": "https://example.com/2", "uid": "own", "secret": own}),
    )
    .await;
    let (_, secret) = api
        .call(Method::GET, &format!("{path}/own/secret"), None)
        .await;
    assert_eq!(secret["key"], own);
}

#[tokio::test]
async fn endpoint_headers_are_replaced_and_merged() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    api.endpoint(
        &app,
        json!({"url": "http://example.com", "uid": "e", "headers": {"X-A": "1"}}),
    )
    .await;
    let path = format!("/app/{app}/endpoint/e/headers");
    let (status, _) = api
        .call(
            Method::PUT,
            &path,
            Some(json!({"headers": {"X-B": "2", "X-C": "3"}})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = api
        .call(
            Method::PATCH,
            &path,
            Some(json!({"headers": {"X-C": null, "X-D": "4"}})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, out) = api.call(Method::GET, &path, None).await;
    assert_eq!(out["headers"], json!({"X-B": "2", "X-D": "4"}));
    let (status, out) = api
        .call(
            Method::PATCH,
            &path,
            Some(json!({"headers": {"svix-id": "x"}})),
        )
        .await;
    assert_invalid_field(status, &out, "svix-id");
}

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
async fn event_types_archive_on_delete_and_expunge_on_request() {
    let api = start_default().await;
    let (status, _) = api
        .call(
            Method::POST,
            "/event-type",
            Some(json!({"name": "a.b", "description": "AB", "schemas": {"1": {}}})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, patched) = api
        .call(
            Method::PATCH,
            "/event-type/a.b",
            Some(json!({"deprecated": true})),
        )
        .await;
    assert_eq!(patched["deprecated"], true);
    api.call(Method::DELETE, "/event-type/a.b", None).await;
    let (_, visible) = api.call(Method::GET, "/event-type", None).await;
    assert_eq!(visible["data"], json!([]));
    let (_, all) = api
        .call(Method::GET, "/event-type?include_archived=true", None)
        .await;
    assert_eq!(all["data"][0]["archived"], true);
    api.call(Method::DELETE, "/event-type/a.b?expunge=true", None)
        .await;
    assert_eq!(
        api.call(Method::GET, "/event-type/a.b", None).await.0,
        StatusCode::NOT_FOUND
    );
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
async fn an_app_token_reaches_its_own_app_and_gets_403_elsewhere() {
    let api = start_default().await;
    let mine = api.app("Mine", Some("mine")).await;
    api.app("Theirs", Some("theirs")).await;
    let token = api.app_token(&mine).await;
    assert_eq!(
        api.call_as(Some(&token), Method::GET, "/app/mine", None)
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        api.call_as(Some(&token), Method::GET, "/app/mine/endpoint", None)
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        api.call_as(Some(&token), Method::GET, "/app/theirs", None)
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        api.call_as(Some(&token), Method::GET, "/app", None).await.0,
        StatusCode::FORBIDDEN
    );
    let (status, _) = api
        .call_as(
            Some(&token),
            Method::POST,
            "/event-type",
            Some(json!({"name": "x", "description": "x"})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn every_operation_in_the_openapi_document_is_routed() {
    let api = start_default().await;
    let document: Value = serde_json::from_str(hookd_api::routes::health::OPENAPI).unwrap();
    for (path, operations) in document["paths"].as_object().unwrap() {
        for method in operations.as_object().unwrap().keys() {
            let concrete = path
                .strip_prefix("/api/v1")
                .unwrap()
                .replace(['{', '}'], "");
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let (status, body) = api.call(method.clone(), &concrete, Some(json!({}))).await;
            let unrouted = body["detail"] == "route not found"
                || body["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("method is not allowed"));
            assert!(
                !unrouted && status != StatusCode::INTERNAL_SERVER_ERROR,
                "{method} {path}: {status} {body}"
            );
        }
    }
}

#[tokio::test]
async fn endpoints_show_why_they_are_disabled_and_bound_their_timeout() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let path = format!("/app/{app}/endpoint");
    for timeout in [json!(0), json!(31), json!(-1), json!("ten")] {
        let body = json!({"url": "http://example.com", "timeoutSeconds": timeout});
        let (status, out) = api.call(Method::POST, &path, Some(body)).await;
        assert_invalid_field(status, &out, "timeoutSeconds");
    }
    let created = api
        .endpoint(
            &app,
            json!({"url": "http://example.com", "uid": "e", "disabled": true, "timeoutSeconds": 30}),
        )
        .await;
    assert_eq!(created["disabledReason"], "disabled through the API");
    let disabled_at = created["disabledAt"].as_str().unwrap();
    hookd_core::Timestamp::parse_rfc3339(disabled_at).unwrap();
    assert_eq!(created["timeoutSeconds"], 30);

    let one = format!("{path}/e");
    let (status, out) = api
        .call(Method::PATCH, &one, Some(json!({"timeoutSeconds": 45})))
        .await;
    assert_invalid_field(status, &out, "timeoutSeconds");
    let (_, enabled) = api
        .call(
            Method::PATCH,
            &one,
            Some(json!({"disabled": false, "timeoutSeconds": null})),
        )
        .await;
    assert_eq!(
        (
            &enabled["disabled"],
            &enabled["disabledReason"],
            &enabled["disabledAt"],
            &enabled["timeoutSeconds"]
        ),
        (&json!(false), &Value::Null, &Value::Null, &Value::Null)
    );

    // Disabled by hookd: the API shows hookd's reason, and keeps it when disabling again.
    let id = hookd_core::EndpointId::from_stored(enabled["id"].as_str().unwrap().to_owned());
    let at = hookd_core::Timestamp::from_millis(1_700_000_000_000);
    api.store
        .disable_endpoint(&id, "the endpoint answered 410 Gone", at)
        .await
        .unwrap();
    let (_, fetched) = api.call(Method::GET, &one, None).await;
    assert_eq!(fetched["disabled"], true);
    assert_eq!(fetched["disabledReason"], "the endpoint answered 410 Gone");
    assert_eq!(fetched["disabledAt"], at.to_rfc3339());
    let (_, again) = api
        .call(Method::PATCH, &one, Some(json!({"disabled": true})))
        .await;
    assert_eq!(again["disabledReason"], "the endpoint answered 410 Gone");
    // PUT replaces: without `disabled`, the endpoint is enabled again.
    let (status, put) = api
        .call(
            Method::PUT,
            &one,
            Some(json!({"url": "http://example.com", "timeoutSeconds": 5})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{put}");
    assert_eq!(
        (
            &put["disabled"],
            &put["disabledReason"],
            &put["timeoutSeconds"]
        ),
        (&json!(false), &Value::Null, &json!(5))
    );
}

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
    let now = hookd_core::Timestamp::from_millis(1_700_000_000_000);
    let (message_id, endpoint_id) = (
        hookd_core::MessageId::from_stored(msg["id"].as_str().unwrap().to_owned()),
        hookd_core::EndpointId::from_stored(ep["id"].as_str().unwrap().to_owned()),
    );
    let attempt = hookd_core::model::Attempt {
        id: hookd_core::AttemptId::new(now),
        message_id: message_id.clone(),
        endpoint_id: endpoint_id.clone(),
        url: "http://example.com".into(),
        response_status_code: 503,
        response: "busy".into(),
        response_head: "HTTP/1.1 503 Service Unavailable\r\nretry-after: 30\r\n".into(),
        response_duration_ms: 12,
        status: hookd_core::model::DeliveryStatus::Fail,
        trigger_type: hookd_core::model::TriggerType::Scheduled,
        created_at: now,
    };
    let next = hookd_core::model::Delivery {
        message_id,
        endpoint_id,
        status: hookd_core::model::DeliveryStatus::Pending,
        attempt_count: 1,
        next_attempt_at: Some(now),
        updated_at: now,
    };
    api.store.record_attempt(&attempt, &next).await.unwrap();
    let (_, attempts) = api
        .call(Method::GET, &format!("/app/{app}/attempt/endpoint/e"), None)
        .await;
    assert_eq!(
        attempts["data"][0]["responseHead"],
        "HTTP/1.1 503 Service Unavailable\r\nretry-after: 30\r\n"
    );
    assert_eq!(attempts["data"][0]["response"], "busy");
}
