//! Event types over real HTTP on loopback and a real SQLite file: the catalog's archive on
//! delete and expunge on request.

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
