//! A real hookd API on a loopback port over a real SQLite file (or a real PostgreSQL database,
//! where a test runs on both backends), and a small client for it.

#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::sync::Arc;

use hookd_api::{ApiConfig, ApiState, token_hash};
use hookd_core::model::{Attempt, Delivery, DeliveryStatus, TriggerType};
use hookd_core::{AttemptId, Clock, EndpointId, MessageId, SystemClock, Timestamp};
use hookd_store::testing::{PgDatabaseGuard, postgres_store, sqlite_store};
use hookd_store::{ApiToken, Store};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::sync::Notify;

pub const ADMIN_TOKEN: &str = "test-admin-token";

pub struct TestApi {
    pub base: String,
    pub store: Arc<dyn Store>,
    pub new_work: Arc<Notify>,
    client: reqwest::Client,
    database: Database,
}

/// What keeps the test's database alive: the SQLite file's directory, or the PostgreSQL
/// database's guard (which drops it).
enum Database {
    Sqlite(tempfile::TempDir),
    Postgres(PgDatabaseGuard),
}

/// Starts the API with `config` (plus the test admin token) and returns once it listens.
pub async fn start(config: ApiConfig) -> TestApi {
    start_with_clock(config, Arc::new(SystemClock)).await
}

/// [`start`] on `clock` (a [`hookd_core::ManualClock`] for rate limits and expiry).
pub async fn start_with_clock(config: ApiConfig, clock: Arc<dyn Clock>) -> TestApi {
    let (store, dir) = sqlite_store().await;
    serve(Arc::new(store), clock, config, Database::Sqlite(dir)).await
}

/// The API with plain-http endpoints allowed on each backend: SQLite, and PostgreSQL when
/// `HOOKD_TEST_POSTGRES_URL` names a server (`test` names the caller if it is skipped).
pub async fn start_default_on_each_backend(test: &str) -> Vec<TestApi> {
    let mut apis = vec![start_default().await];
    if let Some((store, guard)) = postgres_store(test).await {
        let clock = Arc::new(SystemClock);
        apis.push(
            serve(
                Arc::new(store),
                clock,
                http_allowed(),
                Database::Postgres(guard),
            )
            .await,
        );
    }
    apis
}

async fn serve(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    mut config: ApiConfig,
    database: Database,
) -> TestApi {
    config
        .configured_admin_token_hashes
        .push(token_hash(ADMIN_TOKEN));
    let new_work = Arc::new(Notify::new());
    let state = ApiState::new(store.clone(), clock, config, new_work.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, hookd_api::router(state))
            .await
            .unwrap()
    });
    TestApi {
        base,
        store,
        new_work,
        client: reqwest::Client::new(),
        database,
    }
}

/// The API with plain-http endpoints allowed, as most tests want.
pub async fn start_default() -> TestApi {
    start(http_allowed()).await
}

fn http_allowed() -> ApiConfig {
    ApiConfig {
        allow_http_endpoints: true,
        ..ApiConfig::default()
    }
}

impl TestApi {
    /// The directory holding the database file (on SQLite).
    pub fn dir(&self) -> &std::path::Path {
        match &self.database {
            Database::Sqlite(dir) => dir.path(),
            Database::Postgres(_) => panic!("a PostgreSQL database has no file"),
        }
    }

    /// Sends a request with `token` (if any) and an optional body; returns status and JSON.
    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.send(
            token,
            method,
            path,
            body.map(|b| b.to_string().into_bytes()),
            &[],
        )
        .await
    }

    /// As the admin.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.call_as(Some(ADMIN_TOKEN), method, path, body).await
    }

    /// As the admin, at `path` from the server's root: the ingest API (`/ingest/api/v1/…`) is
    /// served beside `/api/v1`.
    pub async fn call_at_root(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let root = self.base.trim_end_matches("/api/v1");
        let body = body.map(|b| b.to_string().into_bytes());
        self.send_to(
            Some(ADMIN_TOKEN),
            method,
            format!("{root}{path}"),
            body,
            &[],
        )
        .await
    }

    /// Raw bytes and extra headers, for malformed-input tests.
    pub async fn send(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let url = format!("{}{path}", self.base);
        self.send_to(token, method, url, body, headers).await
    }

    /// [`TestApi::send`] to a whole URL.
    async fn send_to(
        &self,
        token: Option<&str>,
        method: Method,
        url: String,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let mut request = self.client.request(method, url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let bytes = response.bytes().await.unwrap();
        let json = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        (status, json)
    }

    /// Creates an application and returns its id.
    pub async fn app(&self, name: &str, uid: Option<&str>) -> String {
        let (status, body) = self
            .call(
                Method::POST,
                "/app",
                Some(serde_json::json!({"name": name, "uid": uid})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    /// Creates an endpoint and returns its JSON.
    pub async fn endpoint(&self, app: &str, body: Value) -> Value {
        let (status, out) = self
            .call(Method::POST, &format!("/app/{app}/endpoint"), Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
        out
    }

    /// Records a failed attempt of message `msg` to endpoint `ep`, answered 500 with `head`
    /// and `body`, as the engine would; the delivery is left failed. Returns the attempt's id.
    pub async fn failed_attempt(&self, msg: &str, ep: &str, head: &str, body: &str) -> String {
        let now = SystemClock.now();
        let attempt = Attempt {
            id: AttemptId::new(now),
            message_id: MessageId::from_stored(msg.to_owned()),
            endpoint_id: EndpointId::from_stored(ep.to_owned()),
            url: "http://example.com".into(),
            response_status_code: 500,
            response: body.into(),
            response_head: head.into(),
            response_duration_ms: 7,
            status: DeliveryStatus::Fail,
            trigger_type: TriggerType::Scheduled,
            created_at: now,
        };
        let failed = Delivery {
            message_id: attempt.message_id.clone(),
            endpoint_id: attempt.endpoint_id.clone(),
            status: DeliveryStatus::Fail,
            attempt_count: 1,
            next_attempt_at: None,
            updated_at: now,
            ordering_key: None,
        };
        self.store.record_attempt(&attempt, &failed).await.unwrap();
        attempt.id.to_string()
    }

    /// Stores a token scoped to one application and returns its text.
    pub async fn app_token(&self, app_id: &str) -> String {
        let text = format!("app-token-{app_id}");
        let token = ApiToken {
            id: format!("tok_{app_id}"),
            token_hash: token_hash(&text),
            app_id: Some(hookd_core::AppId::from_stored(app_id.to_owned())),
            created_at: Timestamp::from_millis(0),
            ..ApiToken::default()
        };
        self.store.create_token(&token).await.unwrap();
        text
    }
}

/// Asserts a 422 whose detail names `field` (its last `loc` element).
pub fn assert_invalid_field(status: StatusCode, body: &Value, field: &str) {
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["code"], "validation", "{body}");
    let loc = body["detail"][0]["loc"].as_array().expect("loc list");
    assert_eq!(loc.last().and_then(Value::as_str), Some(field), "{body}");
}
