//! Event types over real HTTP on loopback and a real SQLite file: the catalog's archive on
//! delete and expunge on request, the group and feature flags Svix's SDKs send, and schemas
//! that do not compile refused.

mod common;

use common::start_default;
use reqwest::{Method, StatusCode};
use serde_json::json;

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
async fn an_event_types_group_and_feature_flags_are_kept_patched_and_checked() {
    let api = start_default().await;
    let created = json!({"name": "order.shipped", "description": "Shipped",
                         "groupName": "orders", "featureFlags": ["beta", "eu-only"]});
    let (status, body) = api.call(Method::POST, "/event-type", Some(created)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (_, read) = api
        .call(Method::GET, "/event-type/order.shipped", None)
        .await;
    assert_eq!(read["groupName"], "orders", "{read}");
    assert_eq!(read["featureFlags"], json!(["beta", "eu-only"]), "{read}");

    let patch = json!({"groupName": "shipping", "featureFlags": null});
    let (_, patched) = api
        .call(Method::PATCH, "/event-type/order.shipped", Some(patch))
        .await;
    assert_eq!(patched["groupName"], "shipping", "{patched}");
    assert_eq!(patched["featureFlags"], json!(null), "{patched}");
    let (_, listed) = api.call(Method::GET, "/event-type", None).await;
    assert_eq!(listed["data"][0]["groupName"], "shipping", "{listed}");

    let bad = json!({"name": "order.paid", "description": "Paid", "featureFlags": ["no spaces"]});
    let (status, body) = api.call(Method::POST, "/event-type", Some(bad)).await;
    common::assert_invalid_field(status, &body, "featureFlags");
    let bad = json!({"description": "Shipped", "groupName": "no/slashes"});
    let (status, body) = api
        .call(Method::PUT, "/event-type/order.shipped", Some(bad))
        .await;
    common::assert_invalid_field(status, &body, "groupName");
}

#[tokio::test]
async fn schemas_that_do_not_compile_are_refused_on_create_put_and_patch() {
    let api = start_default().await;
    let backreference = json!({"1": {"type": "object"}, "2": {"pattern": "^(a)\\1$"}});
    let refused = |body: serde_json::Value| {
        let message = body["detail"][0]["msg"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (body["detail"][0]["loc"].clone(), message)
    };
    let created = json!({"name": "a.b", "description": "AB", "schemas": backreference});
    let (status, body) = api.call(Method::POST, "/event-type", Some(created)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (field, message) = refused(body);
    assert_eq!(field, json!(["body", "schemas"]));
    assert!(message.starts_with("version \"2\": ") && message.contains("backreferences"));

    let fine = json!({"name": "a.b", "description": "AB", "schemas": {"1": {}}});
    assert_eq!(
        api.call(Method::POST, "/event-type", Some(fine)).await.0,
        StatusCode::CREATED
    );
    let put = json!({"description": "AB", "schemas": {"1": {"type": 12}}});
    let (status, body) = api.call(Method::PUT, "/event-type/a.b", Some(put)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(refused(body).0, json!(["body", "schemas"]));
    let patch = json!({"schemas": backreference});
    let (status, body) = api
        .call(Method::PATCH, "/event-type/a.b", Some(patch))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(refused(body).0, json!(["body", "schemas"]));
    let (_, kept) = api.call(Method::GET, "/event-type/a.b", None).await;
    assert_eq!(
        kept["schemas"],
        json!({"1": {}}),
        "a refused change changes nothing"
    );
}
