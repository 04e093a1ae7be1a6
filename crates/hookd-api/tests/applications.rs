//! Applications over real HTTP on loopback and a real SQLite file: create, read by id or uid,
//! replace (PUT, creating a missing one), patch and delete, and `get_if_exists`.

mod common;

use common::start_default;
use reqwest::{Method, StatusCode};
use serde_json::json;

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
