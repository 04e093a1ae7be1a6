//! Endpoints over real HTTP on loopback and a real SQLite file (and PostgreSQL where a test
//! says so): validation, secrets, custom headers, the disabled state, timeouts, the ceiling
//! on requests in flight and the ordering.

mod common;

use common::{assert_invalid_field, start, start_default};
use hookd_api::ApiConfig;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

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
        .disable_endpoint(&id, "the endpoint answered 410 Gone", at, &[])
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
async fn a_rate_limit_of_zero_is_refused_on_create_and_replace_but_not_on_patch() {
    let api = start_default().await;
    let (status, out) = api
        .call(
            Method::POST,
            "/app",
            Some(json!({"name": "Acme", "throttleRate": 0})),
        )
        .await;
    assert_invalid_field(status, &out, "throttleRate");
    let app = api.app("Acme", None).await;
    let path = format!("/app/{app}/endpoint");
    for name in ["throttleRate", "rateLimit"] {
        let body = json!({"url": "http://example.com", name: 0});
        let (status, out) = api.call(Method::POST, &path, Some(body)).await;
        assert_invalid_field(status, &out, "throttleRate");
    }
    let created = api
        .endpoint(
            &app,
            json!({"url": "http://example.com", "throttleRate": 5}),
        )
        .await;
    let one = format!("{path}/{}", created["id"].as_str().unwrap());
    let replace = json!({"url": "http://example.com", "throttleRate": 0});
    let (status, out) = api.call(Method::PUT, &one, Some(replace)).await;
    assert_invalid_field(status, &out, "throttleRate");
    // Svix's patch schema allows 0: no limit.
    let (status, patched) = api
        .call(Method::PATCH, &one, Some(json!({"throttleRate": 0})))
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["throttleRate"], 0);
}

#[tokio::test]
async fn an_endpoints_max_concurrency_is_set_replaced_patched_and_bounded() {
    for api in common::start_default_on_each_backend("endpoints::max_concurrency").await {
        let app = api.app("Acme", None).await;
        let path = format!("/app/{app}/endpoint");
        for ceiling in [
            json!(0),
            json!(1001),
            json!(70_000),
            json!(-1),
            json!("ten"),
        ] {
            let body = json!({"url": "http://example.com", "maxConcurrency": ceiling});
            let (status, out) = api.call(Method::POST, &path, Some(body)).await;
            assert_invalid_field(status, &out, "maxConcurrency");
        }
        let unset = api
            .endpoint(&app, json!({"url": "http://example.com"}))
            .await;
        assert_eq!(unset.get("maxConcurrency"), Some(&Value::Null), "{unset}");
        let created = api
            .endpoint(
                &app,
                json!({"url": "http://example.com", "uid": "e", "maxConcurrency": 1000}),
            )
            .await;
        assert_eq!(created["maxConcurrency"], 1000);
        let one = format!("{path}/e");
        let stored =
            || async { api.call(Method::GET, &one, None).await.1["maxConcurrency"].clone() };
        assert_eq!(stored().await, 1000);

        let replace = |ceiling: Value| json!({"url": "http://example.com", "uid": "e", "maxConcurrency": ceiling});
        let (status, out) = api
            .call(Method::PUT, &one, Some(replace(json!(1001))))
            .await;
        assert_invalid_field(status, &out, "maxConcurrency");
        let (status, out) = api.call(Method::PUT, &one, Some(replace(json!(16)))).await;
        assert_eq!(
            (status, &out["maxConcurrency"]),
            (StatusCode::OK, &json!(16))
        );
        assert_eq!(stored().await, 16);
        // PUT replaces: without the field, the endpoint has no ceiling of its own.
        let body = json!({"url": "http://example.com", "uid": "e"});
        let (_, out) = api.call(Method::PUT, &one, Some(body)).await;
        assert_eq!(out["maxConcurrency"], Value::Null);
        assert_eq!(stored().await, Value::Null);

        let patch = |body: Value| api.call(Method::PATCH, &one, Some(body));
        let (status, out) = patch(json!({"maxConcurrency": 0})).await;
        assert_invalid_field(status, &out, "maxConcurrency");
        let (_, out) = patch(json!({"maxConcurrency": 1})).await;
        assert_eq!(out["maxConcurrency"], 1);
        assert_eq!(stored().await, 1);
        // Absent leaves it; null clears it.
        let (_, out) = patch(json!({"description": "kept"})).await;
        assert_eq!(out["maxConcurrency"], 1);
        assert_eq!(stored().await, 1);
        let (_, out) = patch(json!({"maxConcurrency": null})).await;
        assert_eq!(out["maxConcurrency"], Value::Null);
        assert_eq!(stored().await, Value::Null);
    }
}

#[tokio::test]
async fn an_endpoints_ordering_is_per_key_unless_made_strict() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let ep = api
        .endpoint(&app, json!({"url": "https://a.example.com/hook"}))
        .await;
    assert_eq!(ep["ordering"], "perKey");
    let path = format!("/app/{app}/endpoint/{}", ep["id"].as_str().unwrap());
    let (status, patched) = api
        .call(Method::PATCH, &path, Some(json!({"ordering": "strict"})))
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["ordering"], "strict");
    let (_, shown) = api.call(Method::GET, &path, None).await;
    assert_eq!(shown["ordering"], "strict");
    let (status, body) = api
        .call(Method::PATCH, &path, Some(json!({"ordering": "fifo"})))
        .await;
    assert_invalid_field(status, &body, "ordering");
    let (status, body) = api
        .call(
            Method::POST,
            &format!("/app/{app}/endpoint"),
            Some(json!({"url": "https://b.example.com/hook", "ordering": "sorted"})),
        )
        .await;
    assert_invalid_field(status, &body, "ordering");
}

/// Svix's cloud API names an endpoint's event types `filterTypes`, the open-source server
/// `eventTypes`: either is taken, and every answer carries both.
#[tokio::test]
async fn event_types_are_answered_under_both_names() {
    let api = start_default().await;
    let app = api.app("Acme", None).await;
    let created = api
        .endpoint(
            &app,
            json!({"url": "https://example.com/hook", "uid": "main", "filterTypes": ["invoice.paid"]}),
        )
        .await;
    assert_eq!(created["eventTypes"], json!(["invoice.paid"]), "{created}");
    assert_eq!(created["filterTypes"], json!(["invoice.paid"]), "{created}");
    let path = format!("/app/{app}/endpoint/main");
    let (status, patched) = api
        .call(
            Method::PATCH,
            &path,
            Some(json!({"eventTypes": ["order.shipped"]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    let (_, read) = api.call(Method::GET, &path, None).await;
    assert_eq!(read["eventTypes"], json!(["order.shipped"]), "{read}");
    assert_eq!(read["filterTypes"], json!(["order.shipped"]), "{read}");
}
