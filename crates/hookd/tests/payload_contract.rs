//! The contract between a producer, hookd and a receiver, with the real binary: the Standard
//! Webhooks envelope built by hookd where an application or an event type asks for it (and
//! the producer's bytes left alone elsewhere), every delivery verified with the reference
//! Python `standardwebhooks` library; the add-only rule of the event catalog on SQLite and
//! PostgreSQL; test sends marked inside the signed body; payloads over
//! `--large-payload-bytes` counted.

mod support;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use axum::http::StatusCode;
use hookd_engine::testing::{Received, Receiver};
use hookd_outbox::Event;
use hookd_store::testing::{fresh_postgres, fresh_sqlite};
use serde_json::{Value, json};
use support::{Api, Hookd, python};
use webhook_signature::Secret;

const TOKEN: &str = "payload-contract-admin-token";

/// An application (`body`) with one endpoint at `url` signing with `secret`: its id.
async fn app_with(api: &Api, body: Value, url: &str, secret: &str) -> String {
    let (status, app) = api.post("/app", body).await.unwrap();
    assert_eq!(status, 201, "{app}");
    let app = app["id"].as_str().unwrap().to_owned();
    let endpoint = json!({"url": url, "secret": secret});
    let (status, ep) = api
        .post(&format!("/app/{app}/endpoint"), endpoint)
        .await
        .unwrap();
    assert_eq!(status, 201, "{ep}");
    app
}

/// hookd (given `extra` options) on a fresh SQLite file, its API, a receiver, and two secrets
/// for the receiver's endpoints (hookd refuses a key another endpoint holds).
async fn started(extra: &[&str]) -> (Hookd, Api, Receiver, [String; 2], tempfile::TempDir) {
    let (database, dir) = fresh_sqlite();
    let hookd = Hookd::serve_local(&database, TOKEN, extra);
    let api = Api::new(&hookd, TOKEN);
    let receiver = Receiver::always(StatusCode::OK).await;
    let secrets = [(); 2].map(|()| Secret::generate().to_string());
    (hookd, api, receiver, secrets, dir)
}

/// The request `receiver` got for message `id`.
fn delivery_of(receiver: &Receiver, id: &str) -> Received {
    let requests = receiver.requests();
    let found = requests.iter().find(|r| r.header("webhook-id") == id);
    found
        .cloned()
        .unwrap_or_else(|| panic!("no delivery of {id}"))
}

/// Each request verified with the reference Python `standardwebhooks` and one of `secrets`, its
/// body parsed by the library: what it answers, in order. `None` without a Python to run it.
fn verified_by_python(secrets: &[String], requests: &[&Received]) -> Option<Vec<Value>> {
    let python = python()?;
    let script = "import json, sys
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
given = json.load(sys.stdin)
verifiers = [Webhook(secret) for secret in given['secrets']]
def verify(r):
    for verifier in verifiers:
        try:
            return verifier.verify(r['body'].encode(), r['headers'])
        except WebhookVerificationError:
            pass
    raise WebhookVerificationError('no secret verifies ' + r['headers']['webhook-id'])
print(json.dumps([verify(r) for r in given['requests']]))";
    let requests: Vec<Value> = requests
        .iter()
        .map(|r| {
            let headers: serde_json::Map<String, Value> =
                ["webhook-id", "webhook-timestamp", "webhook-signature"]
                    .iter()
                    .map(|name| (name.to_string(), json!(r.header(name))))
                    .collect();
            json!({"headers": headers, "body": String::from_utf8(r.body.to_vec()).unwrap()})
        })
        .collect();
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python");
    let input = json!({"secrets": secrets, "requests": requests}).to_string();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "standardwebhooks refused: {stderr}"
    );
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_envelope_is_built_where_asked_and_verifies_with_standardwebhooks() {
    let (_hookd, api, receiver, secrets, _dir) = started(&[]).await;
    let enveloped = json!({"name": "Acme", "uid": "acme", "envelope": true});
    let acme = app_with(&api, enveloped, &receiver.url, &secrets[0]).await;
    let plain = app_with(&api, json!({"name": "Plain"}), &receiver.url, &secrets[1]).await;
    let v2 = json!({"name": "order.shipped.v2", "description": "Shipped", "envelope": true});
    let (status, made) = api.post("/event-type", v2).await.unwrap();
    assert_eq!(
        (status, made["envelope"].clone()),
        (201, json!(true)),
        "{made}"
    );

    let publish = async |app: &str, body: Value| {
        let (status, message) = api.post(&format!("/app/{app}/msg"), body).await.unwrap();
        assert_eq!(status, 202, "{message}");
        message
    };
    let at = "2026-11-14T10:53:14.141+01:00";
    let shipped = json!({"orderId": 1003, "trackingNumber": "LC-7781240"});
    let body = json!({"eventType": "order.shipped", "payload": shipped, "occurredAt": at});
    let by_app = publish(&acme, body).await;
    let body = json!({"eventType": "order.shipped", "payload": shipped});
    let untouched = publish(&plain, body).await;
    let body = json!({"eventType": "order.shipped.v2", "payload": {"orderId": 7}});
    let by_type = publish(&plain, body).await;
    receiver.wait_for(3).await;

    let [by_app, untouched, by_type] =
        [&by_app, &untouched, &by_type].map(|m| delivery_of(&receiver, m["id"].as_str().unwrap()));
    assert_eq!(
        std::str::from_utf8(&by_app.body).unwrap(),
        r#"{"type":"order.shipped","timestamp":"2026-11-14T09:53:14.141Z","data":{"orderId":1003,"trackingNumber":"LC-7781240"}}"#,
        "the producer's bytes in data, the event's time in UTC"
    );
    assert_eq!(
        &untouched.body[..],
        br#"{"orderId":1003,"trackingNumber":"LC-7781240"}"#,
        "off by default: the producer's bytes as they are"
    );
    let stamped: Value = serde_json::from_slice(&by_type.body).unwrap();
    let message = api
        .get(&format!(
            "/app/{plain}/msg/{}",
            by_type.header("webhook-id")
        ))
        .await;
    assert_eq!(
        stamped,
        json!({"type": "order.shipped.v2", "timestamp": message["timestamp"], "data": {"orderId": 7}}),
        "without occurredAt, the publish time"
    );
    assert_eq!(
        message["payload"], stamped,
        "the stored payload is what was sent"
    );

    if let Some(read) = verified_by_python(&secrets, &[&by_app, &untouched, &by_type]) {
        assert_eq!(read[0]["type"], "order.shipped");
        assert_eq!(read[0]["data"]["orderId"], 1003);
        assert_eq!(read[1], shipped);
        assert_eq!(read[2]["data"], json!({"orderId": 7}));
    }

    // Svix's shapes: off is not shown, and a PUT that does not name it leaves it on.
    let (status, put) = api
        .call(
            reqwest::Method::PUT,
            "/app/acme",
            Some(json!({"name": "Acme Inc"})),
            &[],
        )
        .await;
    assert_eq!(
        (status, put["envelope"].clone()),
        (200, json!(true)),
        "{put}"
    );
    let shown = api.get(&format!("/app/{plain}")).await;
    assert!(shown.get("envelope").is_none(), "{shown}");
    let bad = json!({"eventType": "order.shipped", "payload": {}, "occurredAt": "yesterday"});
    let (status, refused) = api.post(&format!("/app/{acme}/msg"), bad).await.unwrap();
    assert_eq!(status, 422, "{refused}");
    assert!(refused.to_string().contains("occurredAt"), "{refused}");
}

/// hookd on `database` relays an outbox row, written by `insert` once application `acme` has
/// the envelope on, in the envelope, which `standardwebhooks` verifies.
async fn outbox_row_goes_out_enveloped(database: &str, insert: impl AsyncFnOnce(Event)) {
    let hookd = Hookd::serve_local(database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let receiver = Receiver::always(StatusCode::OK).await;
    let secret = Secret::generate().to_string();
    let enveloped = json!({"name": "Acme", "uid": "acme", "envelope": true});
    app_with(&api, enveloped, &receiver.url, &secret).await;
    insert(Event::from_json_text(
        "acme",
        "order.shipped",
        r#"{"orderId": 1003}"#,
    ))
    .await;

    receiver.wait_for(1).await;
    let request = &receiver.requests()[0];
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["type"], "order.shipped");
    assert_eq!(body["data"], json!({"orderId": 1003}));
    assert!(body["timestamp"].as_str().unwrap().ends_with('Z'), "{body}");
    if let Some(read) = verified_by_python(std::slice::from_ref(&secret), &[request]) {
        assert_eq!(read[0], body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_outbox_row_of_an_enveloped_application_goes_out_enveloped() {
    let (url, _dir) = fresh_sqlite();
    let file = url.strip_prefix("sqlite://").unwrap().to_owned();
    outbox_row_goes_out_enveloped(&url, async |event| {
        let producer = rusqlite::Connection::open(file).unwrap();
        producer.busy_timeout(Duration::from_secs(5)).unwrap();
        event.insert_sqlite(&producer).unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_outbox_row_of_an_enveloped_application_goes_out_enveloped() {
    let name = "payload_contract::postgres_outbox_enveloped";
    let Some((url, _guard)) = fresh_postgres(name).await else {
        return;
    };
    outbox_row_goes_out_enveloped(&url, async |event| {
        let producer = sqlx::PgPool::connect(&url).await.unwrap();
        event.insert(&producer).await.unwrap();
    })
    .await;
}

/// Version 1 of `order.shipped`.
fn shipped_v1() -> Value {
    json!({
        "type": "object",
        "required": ["orderId", "trackingNumber"],
        "properties": {
            "orderId": {"type": "integer"},
            "trackingNumber": {"type": "string"},
            "lines": {"type": "array", "items": {"type": "object",
                "properties": {"isbn": {"type": "string"}}}}
        }
    })
}

/// The catalog's add-only rule through the API of hookd on `database`.
async fn versions_only_add(database: &str) {
    let hookd = Hookd::serve_local(database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let v1 = shipped_v1();
    let made = json!({"name": "order.shipped", "description": "Shipped", "schemas": {"1": v1}});
    assert_eq!(api.post("/event-type", made).await.unwrap().0, 201);
    let put = async |query: &str, schemas: Value| {
        let body = json!({"description": "Shipped", "schemas": schemas});
        let path = format!("/event-type/order.shipped{query}");
        api.call(reqwest::Method::PUT, &path, Some(body), &[]).await
    };
    let refused_naming = |(status, body): (u16, Value), field: &str| {
        assert_eq!(status, 422, "{body}");
        assert_eq!(
            body["detail"][0]["loc"],
            json!(["body", "schemas"]),
            "{body}"
        );
        let message = body["detail"][0]["msg"].as_str().unwrap();
        assert!(message.contains(field), "{field}: {message}");
    };

    let mut removed = shipped_v1();
    removed["properties"]
        .as_object_mut()
        .unwrap()
        .remove("trackingNumber");
    removed["required"] = json!(["orderId"]);
    let answer = put("", json!({"1": v1, "2": removed})).await;
    refused_naming(answer, "removes the field trackingNumber");
    let mut retyped = shipped_v1();
    retyped["properties"]["lines"]["items"]["properties"]["isbn"]["type"] = json!("integer");
    let patch = json!({"schemas": {"1": v1, "2": retyped}});
    let answer = api
        .call(
            reqwest::Method::PATCH,
            "/event-type/order.shipped",
            Some(patch),
            &[],
        )
        .await;
    refused_naming(answer, "changes the type of lines[].isbn");
    let stored = api.get("/event-type/order.shipped").await;
    assert!(
        stored["schemas"].get("2").is_none(),
        "nothing stored: {stored}"
    );

    let mut added = shipped_v1();
    added["properties"]["carrier"] = json!({"type": "string"});
    let (status, body) = put("", json!({"1": v1, "2": added})).await;
    assert_eq!(status, 200, "an added field is accepted: {body}");
    assert_eq!(
        body["schemas"]["2"]["properties"]["carrier"]["type"],
        "string"
    );

    // The breaking shape as a type of its own, beside the old one; or forced, when asked.
    let v2 =
        json!({"name": "order.shipped.v2", "description": "Shipped", "schemas": {"1": removed}});
    assert_eq!(api.post("/event-type", v2).await.unwrap().0, 201);
    let (status, body) = put(
        "?allow_breaking=true",
        json!({"1": v1, "2": added, "3": removed}),
    )
    .await;
    assert_eq!(status, 200, "asked for explicitly: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_breaking_schema_version_is_refused_and_an_additive_one_accepted() {
    let (database, _dir) = fresh_sqlite();
    versions_only_add(&database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_breaking_schema_version_is_refused_and_an_additive_one_accepted() {
    let name = "payload_contract::postgres_versions_only_add";
    let Some((database, _guard)) = fresh_postgres(name).await else {
        return;
    };
    versions_only_add(&database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_send_is_marked_inside_its_signed_body() {
    let (_hookd, api, receiver, secrets, _dir) = started(&[]).await;
    let example = json!({"orderId": 7, "trackingNumber": "LC-1"});
    let schemas = json!({"1": {"type": "object", "examples": [example]}});
    let catalog = json!({"name": "order.shipped", "description": "Shipped", "schemas": schemas});
    assert_eq!(api.post("/event-type", catalog).await.unwrap().0, 201);
    let plain = app_with(&api, json!({"name": "Plain"}), &receiver.url, &secrets[0]).await;
    let enveloped = json!({"name": "Acme", "envelope": true});
    let acme = app_with(&api, enveloped, &receiver.url, &secrets[1]).await;
    let send = async |app: &str, body: Value| {
        let endpoints = api.get(&format!("/app/{app}/endpoint")).await;
        let ep = endpoints["data"][0]["id"].as_str().unwrap().to_owned();
        let path = format!("/app/{app}/endpoint/{ep}/send-example");
        api.post(&path, body).await.unwrap()
    };

    let (status, raw) = send(&plain, json!({"eventType": "order.shipped"})).await;
    assert_eq!(status, 200, "{raw}");
    let (status, wrapped) = send(&acme, json!({"eventType": "order.shipped"})).await;
    assert_eq!(status, 200, "{wrapped}");
    receiver.wait_for(2).await;
    let [raw, wrapped] =
        [&raw, &wrapped].map(|m| delivery_of(&receiver, m["id"].as_str().unwrap()));
    let raw_body: Value = serde_json::from_slice(&raw.body).unwrap();
    assert_eq!(
        raw_body,
        json!({"orderId": 7, "trackingNumber": "LC-1", "test": true})
    );
    let wrapped_body: Value = serde_json::from_slice(&wrapped.body).unwrap();
    assert_eq!(wrapped_body["data"], example);
    assert_eq!(wrapped_body["test"], true, "{wrapped_body}");
    if let Some(read) = verified_by_python(&secrets, &[&raw, &wrapped]) {
        assert_eq!(
            (read[0]["test"].clone(), read[1]["test"].clone()),
            (json!(true), json!(true))
        );
    }

    let clashing = json!({"eventType": "order.shipped", "payload": {"test": "mine"}});
    let (status, refused) = send(&plain, clashing).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["detail"][0]["loc"],
        json!(["body", "payload"]),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_over_the_operators_size_are_counted() {
    let (hookd, api, _, _, _dir) = started(&["--large-payload-bytes", "100"]).await;
    let (_, app) = api.post("/app", json!({"name": "Acme"})).await.unwrap();
    let app = app["id"].as_str().unwrap();
    api.publish(app, "order.shipped", json!({"note": "small"}))
        .await;
    api.publish(app, "order.shipped", json!({"note": "x".repeat(200)}))
        .await;
    let metrics = hookd.metrics().await;
    let counted: Vec<&str> = metrics
        .lines()
        .filter(|line| line.starts_with("hookd_large_payloads_total"))
        .collect();
    assert_eq!(counted, ["hookd_large_payloads_total 1"], "{metrics}");
}
