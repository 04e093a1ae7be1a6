//! The v1 API over real HTTP on loopback and a real SQLite file.

mod common;

use common::{ADMIN_TOKEN, assert_invalid_field, start_default};
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
async fn an_app_token_reaches_its_own_app_and_nothing_elsewhere() {
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
        StatusCode::NOT_FOUND,
        "another application answers as a missing one"
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
            let concrete = path.replace(['{', '}'], "");
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let body = Some(json!({}));
            // The ingest API's paths are beside /api/v1.
            let (status, body) = match concrete.strip_prefix("/api/v1") {
                Some(under) => api.call(method.clone(), under, body).await,
                None => api.call_at_root(method.clone(), &concrete, body).await,
            };
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
