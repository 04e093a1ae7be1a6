//! The delivery log portal in a real headless browser (Debian's chromium through chromedriver,
//! driven by Selenium from `scripts/crosscheck/portal_browser.py`) against the real `hookd`
//! binary and a real receiver that fails, then recovers: sign in with a token, find the failed
//! message, resend it, and see the new successful attempt appear; then open an app-portal link
//! and see only that application. Then, as a customer signed in with a portal link: add an
//! endpoint with two event types, edit it, pause and resume it, send a test event to a receiver
//! on loopback and see its attempt (each step checked through the API as well), and find that
//! another customer's endpoint is out of reach. Last, another customer's endpoint page, with a
//! week of history written through the store, shows its health charts.
//!
//! Without chromium, chromedriver or the Python venv the test says it is skipped;
//! `HOOKD_TEST_REQUIRE_BROWSER=1` (CI) makes a missing browser a failure. With
//! `HOOKD_PORTAL_SCREENSHOTS=<dir>` the script also saves the screenshots the README shows.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use hookd_core::model::{Attempt, Delivery, DeliveryStatus, Message, TriggerType};
use hookd_core::{AppId, AttemptId, Clock, EndpointId, MessageId, SystemClock, Timestamp};
use hookd_engine::testing::Receiver;
use hookd_store::{ApiToken, NewMessage, Route, Store};
use serde_json::json;
use support::{Api, Hookd, python, run_python_script};

const TOKEN: &str = "portal-admin-token";
const APP_TOKEN: &str = "portal-app-token-for-acme";
/// Published with odd spacing: the portal must show these exact bytes, not a re-serialization.
const PAYLOAD: &str = r#"{"orderId":1001,  "total": 12.50, "note":"caf\u00e9"}"#;

/// chromium and chromedriver, or `None` (after saying so) when the test is to be skipped.
fn browser() -> Option<(String, String)> {
    let path = |var: &str, default: &str| std::env::var(var).unwrap_or_else(|_| default.into());
    let chromium = path("HOOKD_TEST_CHROMIUM", "/usr/bin/chromium");
    let driver = path("HOOKD_TEST_CHROMEDRIVER", "/usr/bin/chromedriver");
    if Path::new(&chromium).exists() && Path::new(&driver).exists() {
        return Some((chromium, driver));
    }
    let missing =
        format!("{chromium} or {driver} is missing (apt-get install chromium chromium-driver)");
    assert!(
        std::env::var("HOOKD_TEST_REQUIRE_BROWSER").as_deref() != Ok("1"),
        "HOOKD_TEST_REQUIRE_BROWSER=1 but {missing}"
    );
    eprintln!("SKIPPED: the portal's browser test: {missing}");
    None
}

/// Polls the API until `msg`'s delivery reads `status_text`.
async fn wait_for_delivery(api: &Api, app: &str, msg: &str, status_text: &str) {
    for _ in 0..200 {
        let routed = api.get(&format!("/app/{app}/msg/{msg}/endpoint")).await;
        if routed["data"][0]["statusText"] == status_text {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the delivery of {msg} never became {status_text}");
}

/// Publishes `payload` as these exact bytes (a JSON value would lose their spacing).
async fn publish(hookd: &Hookd, app: &str, event_type: &str, payload: &str) -> String {
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/app/{app}/msg", hookd.base_url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"eventType": "{event_type}", "payload": {payload}}}"#
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 202);
    let msg: serde_json::Value = response.json().await.unwrap();
    msg["id"].as_str().unwrap().to_owned()
}

/// Writes a week of deliveries to `endpoint` through the store, as the engine would have: a
/// few messages every hour, a morning three days ago and an hour this afternoon when most
/// failed, and two from the last hours still waiting (due tomorrow, so this run's engine
/// leaves them alone).
async fn write_history(store: &dyn Store, app: &str, endpoint: &str, url: &str) {
    let now = SystemClock.now();
    let hour = Duration::from_secs(3600);
    for hours_ago in (1..=7 * 24u32).rev() {
        // Busier by day than by night: 1 to 5 an hour.
        let count = 1 + [0, 1, 3, 2][(hours_ago / 6 % 4) as usize] + hours_ago % 2;
        let outage = (70..=76).contains(&hours_ago) || hours_ago == 6;
        for n in 0..count {
            let created = now
                .minus(hour * hours_ago)
                .plus(Duration::from_secs(u64::from(n) * 600));
            let fate = if hours_ago <= 2 && n == 0 {
                None
            } else if outage && n % 3 != 2 {
                Some(DeliveryStatus::Fail)
            } else {
                Some(DeliveryStatus::Success)
            };
            past_delivery(store, app, endpoint, url, created, fate).await;
        }
    }
}

/// One message created at `created` for `endpoint` alone, settled as `fate` by an attempt a
/// second later, or left waiting.
async fn past_delivery(
    store: &dyn Store,
    app: &str,
    endpoint: &str,
    url: &str,
    created: Timestamp,
    fate: Option<DeliveryStatus>,
) {
    let endpoint_id = EndpointId::from_stored(endpoint.to_owned());
    let message = Message {
        id: MessageId::new(created),
        app_id: AppId::from_stored(app.to_owned()),
        event_type: "invoice.paid".into(),
        event_id: None,
        channels: None,
        ordering_key: None,
        tags: None,
        deliver_at: Some(SystemClock.now().plus(Duration::from_secs(24 * 3600))),
        payload: Some(br#"{"invoice": 1}"#.to_vec()),
        created_at: created,
    };
    let new = NewMessage::new(message.clone()).routed(Route::Only(endpoint_id.clone()));
    store.publish(new).await.unwrap();
    let Some(status) = fate else { return };
    let at = created.plus(Duration::from_secs(1));
    let ok = status == DeliveryStatus::Success;
    let attempt = Attempt {
        id: AttemptId::new(at),
        message_id: message.id.clone(),
        endpoint_id: endpoint_id.clone(),
        url: url.to_owned(),
        response_status_code: if ok { 200 } else { 503 },
        response: String::new(),
        response_head: String::new(),
        response_duration_ms: 40,
        status,
        trigger_type: TriggerType::Scheduled,
        created_at: at,
    };
    let delivery = Delivery {
        message_id: message.id,
        endpoint_id,
        status,
        attempt_count: 1,
        next_attempt_at: None,
        updated_at: at,
        ordering_key: None,
    };
    store.record_attempt(&attempt, &delivery).await.unwrap();
}

/// A portal token for `app`, as the provider's backend asks for one.
async fn portal_token(api: &Api, app: &str) -> String {
    let (status, access) = api
        .post(&format!("/auth/app-portal-access/{app}"), json!({}))
        .await
        .unwrap();
    assert_eq!(status, 200, "{access}");
    access["token"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_failed_message_is_found_and_resent_from_the_portal() {
    let Some(python) = python() else { return };
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let healthy = Arc::new(AtomicBool::new(false));
    let switch = healthy.clone();
    let receiver = Receiver::start(move |_| {
        let healthy = switch.clone();
        async move {
            if healthy.load(Ordering::SeqCst) {
                StatusCode::OK
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    })
    .await;
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    // One attempt and no retries: the first failure is final, as after days of retries.
    let hookd = Hookd::serve_local(&database, TOKEN, &["--retry-schedule", "0"]);
    let api = Api::new(&hookd, TOKEN);

    let (status, app) = api
        .post("/app", json!({"name": "Acme Shop", "uid": "acme"}))
        .await
        .unwrap();
    assert_eq!(status, 201, "{app}");
    let app_id = app["id"].as_str().unwrap().to_owned();
    let (status, ep) = api
        .post(
            &format!("/app/{app_id}/endpoint"),
            json!({"url": receiver.url, "description": "Order events", "uid": "orders"}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{ep}");
    let (status, _) = api
        .post(
            &format!("/app/{app_id}/endpoint"),
            json!({"url": receiver.url, "description": "Invoices (paused)", "disabled": true,
                   "eventTypes": ["invoice.paid"]}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201);
    let (status, other) = api.post("/app", json!({"name": "Globex"})).await.unwrap();
    assert_eq!(status, 201);
    // The catalog's page shows this event type's schema and an example made from it.
    let order_schema = json!({"1": {"type": "object", "required": ["orderId"],
        "properties": {"orderId": {"type": "integer", "minimum": 1001}}}});
    let (status, et) = api
        .post(
            "/event-type",
            json!({"name": "order.shipped", "description": "An order left the warehouse",
                   "schemas": order_schema}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{et}");
    let (status, et) = api
        .post(
            "/event-type",
            json!({"name": "order.created", "description": "A customer placed an order"}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{et}");

    let failed = publish(&hookd, &app_id, "order.created", PAYLOAD).await;
    receiver.wait_for(1).await;
    wait_for_delivery(&api, &app_id, &failed, "fail").await;
    healthy.store(true, Ordering::SeqCst);
    for n in 0..3 {
        let payload = format!(r#"{{"orderId": {}, "status": "shipped"}}"#, 1002 + n);
        let msg = publish(&hookd, &app_id, "order.shipped", &payload).await;
        wait_for_delivery(&api, &app_id, &msg, "success").await;
    }

    // Globex takes its events in a Kafka topic (librdkafka's mock cluster, in this process).
    let kafka = rdkafka::mocking::MockCluster::new(1).expect("a mock Kafka cluster");
    kafka.create_topic("orders", 1, 1).unwrap();
    let globex = other["id"].as_str().unwrap().to_owned();
    let (status, stream) = api
        .post(
            &format!("/app/{globex}/destination"),
            json!({"uid": "orders-stream", "type": "kafka",
                   "config": {"bootstrapServers": [kafka.bootstrap_servers()], "topic": "orders"}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{stream}");
    let streamed = publish(&hookd, &globex, "order.shipped", r#"{"orderId": 2001}"#).await;
    wait_for_delivery(&api, &globex, &streamed, "success").await;

    // An app-scoped token, as an app-portal link carries it.
    let store = hookd_store::open(&database).await.unwrap();
    store
        .create_token(&ApiToken {
            id: "tok_portal_test".into(),
            token_hash: hookd_api::token_hash(APP_TOKEN),
            app_id: Some(AppId::from_stored(app_id.clone())),
            created_at: SystemClock.now(),
            expires_at: None,
            ..ApiToken::default()
        })
        .await
        .unwrap();

    // Globex's own HTTP endpoint, with a week of history: what a customer's link must not
    // reach, and the endpoint page whose charts the screenshots show.
    let (status, hooks) = api
        .post(
            &format!("/app/{globex}/endpoint"),
            json!({"url": format!("{}/globex", receiver.url), "uid": "globex-hooks",
                   "description": "Invoices to the ledger", "eventTypes": ["invoice.paid"]}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{hooks}");
    let hooks_id = hooks["id"].as_str().unwrap().to_owned();
    write_history(store.as_ref(), &globex, &hooks_id, &receiver.url).await;

    // The customer's own receiver, for the endpoint it adds in the portal.
    let customer_receiver = Receiver::start(|_| async { StatusCode::OK }).await;
    let acme_link = portal_token(&api, &app_id).await;
    let globex_link = portal_token(&api, &globex).await;

    let other_id = other["id"].as_str().unwrap().to_owned();
    let base_url = hookd.base_url.clone();
    let customer_url = customer_receiver.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        run_python_script(
            &python,
            "portal_browser.py",
            &[
                &base_url,
                &chromium,
                &driver,
                TOKEN,
                APP_TOKEN,
                &app_id,
                &other_id,
                &failed,
                PAYLOAD,
                &acme_link,
                &globex_link,
                &customer_url,
                &hooks_id,
            ],
        )
    })
    .await
    .expect("the browser run panicked");
    assert!(output.contains("portal browser check passed"), "{output}");
    assert_eq!(
        receiver.count(),
        5,
        "one failure, three successes, and the resend from the portal"
    );
    assert_eq!(
        customer_receiver.count(),
        1,
        "the customer's endpoint got the test event, once"
    );
}
