//! Operational webhooks end to end, on SQLite and on PostgreSQL: the API and the engine in this
//! process over one real database, real receivers on loopback, and a clock the test moves (a
//! short retry schedule, so every signature stays inside the verifier's window of real time).
//!
//! An operator subscribes through the v1 API to the `hookd-operations` application and gets
//! `endpoint.created/updated/deleted` for a customer's endpoint, `endpoint.disabled` (with the
//! reason) for one answering 410, `message.attempt.failing` once on the fourth failure, then
//! `message.attempt.exhausted` for one that never answers 2xx and `message.attempt.recovered`
//! for one that does on its fifth attempt. Nothing is told about the operations application's
//! own endpoints, not even of one failing every delivery; a second operations endpoint
//! filtering on `endpoint.disabled` gets that alone.
//!
//! Disabling an endpoint through the API tells `endpoint.disabled` (`trigger: "manual"`) beside
//! `endpoint.updated`, enabling it again `endpoint.enabled`; repeating either tells only
//! `endpoint.updated`, and the operations application's own endpoints are never told of.
//! The reference Python `standardwebhooks` library verifies every operational delivery.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use hookd_api::{ApiConfig, ApiState, token_hash};
use hookd_core::model::{Delivery, DeliveryStatus};
use hookd_core::operations::APP_UID;
use hookd_core::{Clock, ManualClock, SystemClock};
use hookd_engine::http::ssrf::AddressPolicy;
use hookd_engine::http::{HttpConfig, WebhookSender};
use hookd_engine::testing::{Received, Receiver};
use hookd_engine::{Engine, EngineConfig, RetrySchedule};
use hookd_store::{MessageFilter, PageRequest, Store, ensure_operations_app};
use hookd_vault::Keyring;
use serde_json::{Value, json};
use tokio::sync::Notify;

const TOKEN: &str = "operational-webhooks-admin-token";
const OPS_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// hookd (API and engine) over `store`, on a clock the test moves.
struct Hookd {
    base: String,
    client: reqwest::Client,
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    wake: Arc<Notify>,
}

impl Hookd {
    async fn start(store: Arc<dyn Store>) -> Self {
        let clock = Arc::new(ManualClock::new(SystemClock.now()));
        ensure_operations_app(store.as_ref(), clock.now())
            .await
            .unwrap();
        let keyring = Arc::new(Keyring::ephemeral());
        let wake = Arc::new(Notify::new());
        let config = ApiConfig {
            allow_http_endpoints: true,
            configured_admin_token_hashes: vec![token_hash(TOKEN)],
            keyring: keyring.clone(),
            ..ApiConfig::default()
        };
        let state = ApiState::new(store.clone(), clock.clone(), config, wake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/api/v1", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, hookd_api::router(state))
                .await
                .unwrap()
        });
        let engine_config = EngineConfig {
            poll_interval: Duration::from_millis(20),
            // Five attempts a second apart: the fourth failure is "failing", the fifth the last.
            schedule: RetrySchedule::parse("0,1s,1s,1s,1s").unwrap(),
            keyring,
            ..EngineConfig::default()
        };
        let sender = WebhookSender::new(HttpConfig {
            policy: AddressPolicy::default().allow("127.0.0.0/8".parse().unwrap()),
            ..HttpConfig::default()
        })
        .unwrap();
        let engine = Engine::new(
            store.clone(),
            clock.clone(),
            sender,
            engine_config,
            wake.clone(),
        );
        tokio::spawn(engine.run(std::future::pending()));
        Self {
            base,
            client: reqwest::Client::new(),
            store,
            clock,
            wake,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .client
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// Creates an endpoint of `app` at `url` and returns its id.
    async fn endpoint(&self, app: &str, body: Value) -> String {
        let created = self.post(&format!("/app/{app}/endpoint"), body).await;
        created["id"].as_str().unwrap().to_owned()
    }

    /// The deliveries of message `msg_id` of application `app`, by endpoint id.
    async fn deliveries(&self, app: &str, msg_id: &str) -> Vec<(String, Delivery)> {
        let app = self.store.get_app(app).await.unwrap().unwrap();
        let msg = self
            .store
            .get_message(&app.id, msg_id)
            .await
            .unwrap()
            .unwrap();
        let deliveries = self
            .store
            .list_message_deliveries(&app.id, &msg)
            .await
            .unwrap();
        deliveries
            .into_iter()
            .map(|(e, d)| (e.id.to_string(), d))
            .collect()
    }

    /// Waits (bounded) until each of `endpoints` has `n` attempts of the message recorded.
    async fn wait_for_attempts(&self, app: &str, msg_id: &str, endpoints: &[&str], n: u32) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let deliveries = self.deliveries(app, msg_id).await;
            let done = endpoints.iter().all(|ep| {
                deliveries.iter().any(|(id, d)| {
                    id == ep && d.attempt_count >= n && d.status != DeliveryStatus::Sending
                })
            });
            if done {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "attempt {n} never recorded: {deliveries:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Every operational event written, as `(type, data)`, read from the store.
    async fn written_events(&self) -> Vec<(String, Value)> {
        let ops = self.store.get_app(APP_UID).await.unwrap().unwrap();
        let page = PageRequest {
            limit: 100,
            cursor: None,
        };
        let filter = MessageFilter::default();
        let messages = self
            .store
            .list_messages(&ops.id, &filter, &page)
            .await
            .unwrap();
        messages
            .items
            .iter()
            .map(|m| {
                let body: Value = serde_json::from_slice(m.payload.as_deref().unwrap()).unwrap();
                (m.event_type.clone(), body["data"].clone())
            })
            .collect()
    }

    /// Moves the clock past the next retry (1 s plus at most 10 % jitter) and wakes the engine.
    fn next_retry(&self) {
        self.clock.advance(Duration::from_millis(1_200));
        self.wake.notify_one();
    }
}

/// The operational events a receiver got, as `(type, data)`, in arrival order.
fn events(received: &[Received]) -> Vec<(String, Value)> {
    received
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            (
                body["type"].as_str().unwrap().to_owned(),
                body["data"].clone(),
            )
        })
        .collect()
}

/// The events of `type_` whose data's `endpointId` is `endpoint`.
fn about<'a>(events: &'a [(String, Value)], type_: &str, endpoint: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|(t, data)| t == type_ && data["endpointId"] == endpoint)
        .map(|(_, data)| data)
        .collect()
}

/// How many of each event type `events` holds.
fn tally(events: &[(String, Value)]) -> BTreeMap<String, usize> {
    let mut tally = BTreeMap::new();
    for (type_, _) in events {
        *tally.entry(type_.clone()).or_default() += 1;
    }
    tally
}

/// `counts` as [`tally`] gives them.
fn counts(counts: &[(&str, usize)]) -> BTreeMap<String, usize> {
    counts.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

/// Verifies every request with the reference Python library and [`OPS_SECRET`].
fn verify_with_python(requests: &[Received]) {
    let Some(python) = support::python() else {
        return;
    };
    let cases: Vec<Value> = requests
        .iter()
        .map(|r| {
            json!({
                "secret": OPS_SECRET,
                "id": r.header("webhook-id"),
                "timestamp": r.header("webhook-timestamp"),
                "body": String::from_utf8(r.body.to_vec()).unwrap(),
                "signature": r.header("webhook-signature"),
            })
        })
        .collect();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), json!({"verify": cases, "sign": 0}).to_string()).unwrap();
    let output = support::run_python_script(
        &python,
        "standardwebhooks_check.py",
        &[file.path().to_str().unwrap()],
    );
    let answer: Value = serde_json::from_str(&output).unwrap();
    assert_eq!(
        answer["verified"],
        json!(vec![true; requests.len()]),
        "standardwebhooks verifies every operational delivery"
    );
}

/// Subscribes two operators to the operations application: one to everything (signed with
/// `OPS_SECRET`), one to `endpoint.disabled` alone. Returns the first, its endpoint id, and
/// the second.
async fn subscribe_operators(hookd: &Hookd) -> (Receiver, String, Receiver) {
    let operator = Receiver::always(StatusCode::OK).await;
    let disabled_only = Receiver::always(StatusCode::OK).await;
    let endpoint = hookd
        .endpoint(
            "hookd-operations",
            json!({"url": operator.url, "secret": OPS_SECRET}),
        )
        .await;
    hookd
        .endpoint(
            "hookd-operations",
            json!({"url": disabled_only.url, "filterTypes": ["endpoint.disabled"]}),
        )
        .await;
    (operator, endpoint, disabled_only)
}

/// The application `acme` and its endpoint `primary` (which no one listens at); returns the
/// application as created and the endpoint's id.
async fn acme_with_primary(hookd: &Hookd) -> (Value, String) {
    let acme = hookd
        .post("/app", json!({"name": "Acme", "uid": "acme"}))
        .await;
    let primary = hookd
        .endpoint(
            "acme",
            json!({"url": "http://127.0.0.1:9/unused", "uid": "primary"}),
        )
        .await;
    (acme, primary)
}

async fn an_operator_hears_of_endpoints_and_failing_messages(store: Arc<dyn Store>) {
    let hookd = Hookd::start(store).await;
    let (operator, ops_endpoint, disabled_only) = subscribe_operators(&hookd).await;
    // Fails every delivery: were the operations application's own attempts told, this would
    // feed itself.
    let broken = Receiver::always(StatusCode::INTERNAL_SERVER_ERROR).await;
    let broken_ep = hookd
        .endpoint(
            "hookd-operations",
            json!({"url": broken.url, "filterTypes": ["endpoint.created"]}),
        )
        .await;

    // Created, changed, deleted.
    let (_, primary) = acme_with_primary(&hookd).await;
    let one = "/app/acme/endpoint/primary";
    hookd
        .call(
            reqwest::Method::PATCH,
            one,
            Some(json!({"description": "changed"})),
        )
        .await;
    hookd.call(reqwest::Method::DELETE, one, None).await;

    // One message to three endpoints: gone (410), failing for good, recovering on attempt 5.
    let gone = Receiver::always(StatusCode::GONE).await;
    let failing = Receiver::always(StatusCode::INTERNAL_SERVER_ERROR).await;
    let recovering = Receiver::failing_first(4, StatusCode::INTERNAL_SERVER_ERROR).await;
    let gone_ep = hookd.endpoint("acme", json!({"url": gone.url})).await;
    let failing_ep = hookd.endpoint("acme", json!({"url": failing.url})).await;
    let recovering_ep = hookd.endpoint("acme", json!({"url": recovering.url})).await;
    let msg = hookd
        .post(
            "/app/acme/msg",
            json!({"eventType": "order.shipped", "eventId": "order-7", "payload": {"n": 7}}),
        )
        .await;
    let msg_id = msg["id"].as_str().unwrap();
    let retried = [failing_ep.as_str(), recovering_ep.as_str()];
    hookd
        .wait_for_attempts("acme", msg_id, &[gone_ep.as_str()], 1)
        .await;
    hookd.wait_for_attempts("acme", msg_id, &retried, 1).await;
    for attempt in 2..=5 {
        hookd.next_retry();
        hookd
            .wait_for_attempts("acme", msg_id, &retried, attempt)
            .await;
    }
    let deliveries = hookd.deliveries("acme", msg_id).await;
    let status = |ep: &str| {
        deliveries
            .iter()
            .find(|(id, _)| id == ep)
            .map(|(_, d)| d.status)
    };
    assert_eq!(status(&failing_ep), Some(DeliveryStatus::Fail));
    assert_eq!(status(&recovering_ep), Some(DeliveryStatus::Success));

    // 4 created, 1 updated, 1 deleted, 1 disabled, 2 failing, 1 exhausted, 1 recovered.
    operator.wait_for(11).await;
    disabled_only.wait_for(1).await;
    let told = events(&operator.requests());
    assert_eq!(told.len(), 11, "{told:#?}");
    for ep in [&primary, &gone_ep, &failing_ep, &recovering_ep] {
        let created = about(&told, "endpoint.created", ep);
        assert_eq!(created.len(), 1, "{ep}: {told:#?}");
        assert_eq!(created[0]["appUid"], "acme");
    }
    assert_eq!(
        about(&told, "endpoint.created", &primary)[0]["endpointUid"],
        "primary"
    );
    assert_eq!(about(&told, "endpoint.updated", &primary).len(), 1);
    assert_eq!(about(&told, "endpoint.deleted", &primary).len(), 1);
    assert!(
        told.iter()
            .all(|(_, data)| data["endpointId"] != ops_endpoint.as_str()),
        "nothing about the operations application's own endpoints"
    );

    let disabled = about(&told, "endpoint.disabled", &gone_ep);
    assert_eq!(disabled.len(), 1);
    assert_eq!(disabled[0]["trigger"], "automatic");
    assert!(disabled[0]["reason"].as_str().unwrap().contains("410"));
    assert!(disabled[0]["failSince"].is_string());
    assert_eq!(events(&disabled_only.requests())[0].0, "endpoint.disabled");
    assert_eq!(disabled_only.count(), 1, "filterTypes choose what is sent");

    for ep in retried {
        let failing = about(&told, "message.attempt.failing", ep);
        assert_eq!(failing.len(), 1, "failing is told once: {told:#?}");
        assert_eq!(failing[0]["msgId"], msg_id);
        assert_eq!(failing[0]["msgEventId"], "order-7");
        assert_eq!(failing[0]["lastAttempt"]["responseStatusCode"], 500);
    }
    let exhausted = about(&told, "message.attempt.exhausted", &failing_ep);
    assert_eq!(exhausted.len(), 1);
    assert_eq!(exhausted[0]["lastAttempt"]["responseStatusCode"], 500);
    assert!(about(&told, "message.attempt.exhausted", &recovering_ep).is_empty());
    let recovered = about(&told, "message.attempt.recovered", &recovering_ep);
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0]["lastAttempt"]["responseStatusCode"], 204);
    assert!(about(&told, "message.attempt.recovered", &failing_ep).is_empty());

    verify_with_python(&operator.requests());

    // The broken operations endpoint's deliveries fail for good, and are never told of.
    let created: Vec<String> = {
        let ops = hookd.store.get_app(APP_UID).await.unwrap().unwrap();
        let filter = MessageFilter {
            event_types: Some(vec!["endpoint.created".into()]),
            ..MessageFilter::default()
        };
        let page = PageRequest {
            limit: 100,
            cursor: None,
        };
        let listed = hookd.store.list_messages(&ops.id, &filter, &page).await;
        listed
            .unwrap()
            .items
            .iter()
            .map(|m| m.id.to_string())
            .collect()
    };
    assert_eq!(created.len(), 4);
    for msg in &created {
        let exhausted = async || {
            let deliveries = hookd.deliveries(APP_UID, msg).await;
            let to_broken = deliveries.iter().find(|(id, _)| *id == broken_ep);
            to_broken.is_some_and(|(_, d)| d.status == DeliveryStatus::Fail)
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !exhausted().await {
            assert!(tokio::time::Instant::now() < deadline, "never exhausted");
            hookd.next_retry();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let written = hookd.written_events().await;
    assert_eq!(written.len(), 11, "only the events above: {written:#?}");
    assert!(
        written
            .iter()
            .all(|(_, data)| data["endpointId"] != broken_ep.as_str()),
        "nothing about the operations application's own deliveries"
    );
}

async fn an_operator_hears_of_endpoints_disabled_and_enabled_through_the_api(
    store: Arc<dyn Store>,
) {
    let hookd = Hookd::start(store).await;
    let (operator, _, disabled_only) = subscribe_operators(&hookd).await;
    let spare = hookd
        .endpoint(
            "hookd-operations",
            json!({"url": "http://127.0.0.1:9/unused"}),
        )
        .await;
    let (acme, primary) = acme_with_primary(&hookd).await;
    let one = "/app/acme/endpoint/primary";
    let patch = |disabled: bool| {
        hookd.call(
            reqwest::Method::PATCH,
            one,
            Some(json!({"disabled": disabled})),
        )
    };
    let put = |disabled: bool| {
        let body =
            json!({"url": "http://127.0.0.1:9/unused", "uid": "primary", "disabled": disabled});
        hookd.call(reqwest::Method::PUT, one, Some(body))
    };
    // What has been written so far, by type: the store writes in the request's transaction.
    let written = async || tally(&hookd.written_events().await);

    assert_eq!(patch(true).await["disabled"], true);
    assert_eq!(
        written().await,
        counts(&[
            ("endpoint.created", 1),
            ("endpoint.disabled", 1),
            ("endpoint.updated", 1)
        ])
    );
    patch(true).await;
    assert_eq!(
        written().await,
        counts(&[
            ("endpoint.created", 1),
            ("endpoint.disabled", 1),
            ("endpoint.updated", 2)
        ]),
        "disabling a disabled endpoint tells nothing new"
    );
    assert_eq!(put(false).await["disabled"], false);
    let enabled = counts(&[
        ("endpoint.created", 1),
        ("endpoint.disabled", 1),
        ("endpoint.enabled", 1),
        ("endpoint.updated", 3),
    ]);
    assert_eq!(written().await, enabled);
    put(false).await;
    let repeated = counts(&[
        ("endpoint.created", 1),
        ("endpoint.disabled", 1),
        ("endpoint.enabled", 1),
        ("endpoint.updated", 4),
    ]);
    assert_eq!(
        written().await,
        repeated,
        "enabling an enabled endpoint tells nothing new"
    );

    // The operations application's own endpoint, disabled and enabled: nothing is told.
    let own = format!("/app/hookd-operations/endpoint/{spare}");
    for disabled in [true, false] {
        let body = json!({"disabled": disabled});
        hookd.call(reqwest::Method::PATCH, &own, Some(body)).await;
    }
    assert_eq!(written().await, repeated);

    operator.wait_for(7).await;
    disabled_only.wait_for(1).await;
    let told = events(&operator.requests());
    assert_eq!(told.len(), 7, "{told:#?}");
    let disabled = about(&told, "endpoint.disabled", &primary);
    assert_eq!(
        *disabled[0],
        json!({
            "appId": acme["id"],
            "appUid": "acme",
            "endpointId": primary,
            "endpointUid": "primary",
            "trigger": "manual",
            "reason": "disabled through the API",
        }),
        "a manual disable has no failSince"
    );
    let enabled = about(&told, "endpoint.enabled", &primary);
    assert_eq!(
        *enabled[0],
        json!({
            "appId": acme["id"],
            "appUid": "acme",
            "endpointId": primary,
            "endpointUid": "primary",
        })
    );
    assert_eq!(about(&told, "endpoint.updated", &primary).len(), 4);
    let to_disabled_only = events(&disabled_only.requests());
    assert_eq!(to_disabled_only.len(), 1);
    assert_eq!(to_disabled_only[0].1["trigger"], "manual");
    verify_with_python(&operator.requests());
}

/// One `#[tokio::test]` per backend for each case: `sqlite::<case>` and `postgres::<case>`
/// (the latter skipped, saying so, without `HOOKD_TEST_POSTGRES_URL`).
macro_rules! on_both_backends {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            use super::*;
            $(
                #[tokio::test]
                async fn $case() {
                    let (store, _dir) = hookd_store::testing::sqlite_store().await;
                    super::$case(Arc::new(store)).await;
                }
            )*
        }

        mod postgres {
            use super::*;
            $(
                #[tokio::test]
                async fn $case() {
                    let test = concat!("postgres::", stringify!($case));
                    let Some((store, _db)) = hookd_store::testing::postgres_store(test).await
                    else {
                        return;
                    };
                    super::$case(Arc::new(store)).await;
                }
            )*
        }
    };
}

on_both_backends!(
    an_operator_hears_of_endpoints_and_failing_messages,
    an_operator_hears_of_endpoints_disabled_and_enabled_through_the_api,
);
