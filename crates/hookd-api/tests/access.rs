//! Access: tokens created, listed and revoked through the API, their expiry, read-only scope
//! and rate limit (on a clock the test holds still or moves), logout, Svix's app-portal
//! access with its fixed link form, and `whoami`, which tells a token its scope.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{ADMIN_TOKEN, TestApi, start_default, start_with_clock};
use hookd_api::ApiConfig;
use hookd_core::{ManualClock, Timestamp};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn frozen(config: ApiConfig) -> (TestApi, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let config = ApiConfig {
        allow_http_endpoints: true,
        ..config
    };
    (start_with_clock(config, clock.clone()).await, clock)
}

async fn create_token(api: &TestApi, body: Value) -> Value {
    let (status, out) = api.call(Method::POST, "/auth/token", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    out
}

#[tokio::test]
async fn tokens_are_created_listed_and_revoked_and_a_revoked_token_is_refused() {
    let api = start_default().await;
    let app = api.app("Acme", Some("acme")).await;
    let created = create_token(&api, json!({"name": "ci", "appId": "acme"})).await;
    let text = created["token"].as_str().unwrap().to_owned();
    assert_eq!(created["appId"], app.as_str());
    assert_eq!(created["name"], "ci");
    let (status, _) = api
        .call_as(Some(&text), Method::GET, "/app/acme/endpoint", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = api
        .call_as(Some(&text), Method::GET, "/auth/token", None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "only admins manage tokens");

    let (_, listed) = api.call(Method::GET, "/auth/token", None).await;
    let listed = listed["data"].as_array().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], created["id"]);
    assert!(listed[0].get("token").is_none(), "never the text again");

    let id = created["id"].as_str().unwrap();
    let (status, _) = api
        .call(Method::DELETE, &format!("/auth/token/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = api
        .call_as(Some(&text), Method::GET, "/app/acme/endpoint", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "revoked at once");
    let (_, listed) = api.call(Method::GET, "/auth/token", None).await;
    assert!(listed["data"][0]["revokedAt"].is_string());
    let (status, _) = api
        .call(Method::DELETE, "/auth/token/tok_nonexistent", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_admin_token_made_through_the_api_is_an_admin_and_can_log_itself_out() {
    let api = start_default().await;
    let text = create_token(&api, json!({"name": "ops"})).await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = api.call_as(Some(&text), Method::GET, "/app", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = api
        .call_as(Some(&text), Method::POST, "/auth/logout", None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = api.call_as(Some(&text), Method::GET, "/app", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = api.call(Method::POST, "/auth/logout", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("configuration"));
}

#[tokio::test]
async fn a_token_stops_working_when_it_expires() {
    let (api, clock) = frozen(ApiConfig::default()).await;
    let text = create_token(&api, json!({"expiresInSeconds": 60})).await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        api.call_as(Some(&text), Method::GET, "/app", None).await.0,
        StatusCode::OK
    );
    clock.advance(Duration::from_secs(60));
    assert_eq!(
        api.call_as(Some(&text), Method::GET, "/app", None).await.0,
        StatusCode::UNAUTHORIZED,
        "cached or not, an expired token is refused"
    );
}

#[tokio::test]
async fn a_read_only_token_reads_but_neither_writes_nor_sees_secrets() {
    let api = start_default().await;
    api.app("Acme", Some("acme")).await;
    let ep = api
        .endpoint("acme", json!({"url": "http://127.0.0.1:9/hook"}))
        .await;
    let text = create_token(&api, json!({"appId": "acme", "readOnly": true})).await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/app/acme/endpoint/{}", ep["id"].as_str().unwrap());
    assert_eq!(
        api.call_as(Some(&text), Method::GET, &path, None).await.0,
        StatusCode::OK
    );
    let patch = Some(json!({"description": "x"}));
    assert_eq!(
        api.call_as(Some(&text), Method::PATCH, &path, patch)
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    let secret = format!("{path}/secret");
    assert_eq!(
        api.call_as(Some(&text), Method::GET, &secret, None).await.0,
        StatusCode::FORBIDDEN
    );
}

#[tokio::test]
async fn a_token_over_its_rate_limit_gets_429_with_retry_after_and_a_json_body() {
    let (api, clock) = frozen(ApiConfig {
        app_token_rate_limit: 2,
        ..ApiConfig::default()
    })
    .await;
    api.app("Acme", Some("acme")).await;
    let text = create_token(&api, json!({"appId": "acme"})).await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let own = create_token(&api, json!({"rateLimit": 1})).await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    for _ in 0..2 {
        assert_eq!(
            api.call_as(Some(&text), Method::GET, "/app/acme", None)
                .await
                .0,
            StatusCode::OK
        );
    }
    let (status, body) = api
        .call_as(Some(&text), Method::GET, "/app/acme", None)
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["code"], "rate_limited");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("2 requests per second")
    );
    let response = reqwest::Client::new()
        .get(format!("{}/app/acme", api.base))
        .bearer_auth(&text)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["retry-after"], "1");

    assert_eq!(
        api.call_as(Some(&own), Method::GET, "/app", None).await.0,
        StatusCode::OK
    );
    assert_eq!(
        api.call_as(Some(&own), Method::GET, "/app", None).await.0,
        StatusCode::TOO_MANY_REQUESTS,
        "a token's own limit applies to admin tokens too"
    );
    assert_eq!(
        api.call_as(Some(ADMIN_TOKEN), Method::GET, "/app", None)
            .await
            .0,
        StatusCode::OK,
        "each token has its own bucket"
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        api.call_as(Some(&text), Method::GET, "/app/acme", None)
            .await
            .0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn app_portal_access_gives_a_scoped_token_and_a_login_link_in_the_fragment() {
    let api = common::start(ApiConfig {
        public_url: "https://hooks.example.com/".into(),
        ..ApiConfig::default()
    })
    .await;
    api.app("Acme", Some("acme")).await;
    api.app("Other", Some("other")).await;
    let (status, out) = api
        .call(
            Method::POST,
            "/auth/app-portal-access/acme",
            Some(json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let token = out["token"].as_str().unwrap();
    assert_eq!(
        out["url"],
        format!("https://hooks.example.com/portal/login#token={token}")
    );
    assert_eq!(
        api.call_as(Some(token), Method::GET, "/app/acme", None)
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        api.call_as(Some(token), Method::GET, "/app/other", None)
            .await
            .0,
        StatusCode::NOT_FOUND,
        "another application answers as a missing one"
    );
    let (_, listed) = api.call(Method::GET, "/auth/token", None).await;
    let expires = listed["data"][0]["expiresAt"].as_str().unwrap();
    let created = listed["data"][0]["createdAt"].as_str().unwrap();
    let span = Timestamp::parse_rfc3339(expires).unwrap().as_millis()
        - Timestamp::parse_rfc3339(created).unwrap().as_millis();
    assert_eq!(span, 7 * 24 * 3600 * 1000, "seven days by default");

    let (status, out) = api
        .call(
            Method::POST,
            "/auth/app-portal-access/newco",
            Some(json!({"application": {"name": "NewCo", "uid": "newco"}, "expiry": 3600})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        api.call(Method::GET, "/app/newco", None).await.0,
        StatusCode::OK
    );
    let (status, body) = api
        .call(
            Method::POST,
            "/auth/app-portal-access/acme",
            Some(json!({"expiry": 60})),
        )
        .await;
    common::assert_invalid_field(status, &body, "expiry");
    let (status, body) = api
        .call(
            Method::POST,
            "/auth/app-portal-access/acme",
            Some(json!({"capabilities": ["ViewBase"]})),
        )
        .await;
    common::assert_invalid_field(status, &body, "capabilities");
}

#[tokio::test]
async fn whoami_tells_a_token_its_scope() {
    let api = start_default().await;
    let (status, admin) = api.call(Method::GET, "/auth/whoami", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        admin,
        json!({"scope": "admin", "appId": null, "readOnly": false})
    );
    let app = api.app("Acme", None).await;
    let token = api.app_token(&app).await;
    let (_, scoped) = api
        .call_as(Some(&token), Method::GET, "/auth/whoami", None)
        .await;
    assert_eq!(
        scoped,
        json!({"scope": "app", "appId": app, "readOnly": false})
    );
    let (_, access) = api
        .call(
            Method::POST,
            &format!("/auth/app-portal-access/{app}"),
            Some(json!({"readOnly": true})),
        )
        .await;
    let reader = access["token"].as_str().unwrap();
    let (_, read_only) = api
        .call_as(Some(reader), Method::GET, "/auth/whoami", None)
        .await;
    assert_eq!(
        read_only,
        json!({"scope": "app", "appId": app, "readOnly": true})
    );
    let (status, _) = api
        .call_as(Some("nobody"), Method::GET, "/auth/whoami", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
