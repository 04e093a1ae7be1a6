//! Promise: a webhook signed by its provider's own library (npm `stripe`'s
//! `generateTestHeaderString`, `@octokit/webhooks-methods`' `sign`, `standardwebhooks`'
//! `Webhook.sign`; see `scripts/crosscheck/providers-js/sign.mjs`), sent to an ingest source's
//! URL, is accepted, forwarded once to the source's endpoint and verified there by the
//! reference Python `standardwebhooks` library (`scripts/crosscheck/ingest_target.py`), with
//! the body's bytes unchanged and the provider's event type on the message; the same request
//! tampered with, late, signed with another secret or unsigned is refused (401) and never
//! forwarded; the same provider event sent twice is forwarded once.
//!
//! Skipped without Node or `HOOKD_TEST_PYTHON`, unless `HOOKD_TEST_REQUIRE_NODE=1` /
//! `HOOKD_TEST_REQUIRE_PYTHON=1`.

mod support;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{Value, json};
use support::process::{Announced, node_packages};
use support::{Api, Hookd, eventually, python};
use webhook_signature::Secret;

const TOKEN: &str = "ingest-providers-admin-token";

/// The ingest API's sources, from the server's root.
const INGEST: &str = "/ingest/api/v1/source";

/// The npm project with the providers' signing libraries.
fn providers_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/crosscheck/providers-js")
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The signature headers `scheme`'s library puts on `body` (see `sign.mjs`).
fn signed(
    scheme: &str,
    secret: &str,
    body: &str,
    timestamp: i64,
    id: &str,
) -> Vec<(String, String)> {
    let case = json!([{ "scheme": scheme, "secret": secret, "body": body, "timestamp": timestamp, "id": id }]);
    let mut node = Command::new("node")
        .arg(providers_dir().join("sign.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start node");
    let mut stdin = node.stdin.take().unwrap();
    stdin.write_all(case.to_string().as_bytes()).unwrap();
    drop(stdin);
    let output = node.wait_with_output().unwrap();
    assert!(output.status.success(), "sign.mjs failed");
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    answer[0]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, value)| (name.clone(), value.as_str().unwrap().to_owned()))
        .collect()
}

/// The most sources one test makes.
const TARGET_SECRETS: usize = 8;

/// hookd, the verifying target and what they need, or `None` when the test is skipped.
struct Gateway {
    _dir: tempfile::TempDir,
    _hookd: Hookd,
    api: Api,
    /// The same client from the server's root, for the ingest API.
    ingest: Api,
    target: Announced,
    /// The secrets the target verifies with: each source's endpoint signs with one of its own
    /// (hookd refuses a key another endpoint holds).
    target_secrets: Vec<String>,
    /// How many of them sources have taken.
    sources_made: std::sync::atomic::AtomicUsize,
    client: reqwest::Client,
}

/// A source as created: its id, where providers send, and the application it owns.
struct Source {
    id: String,
    url: String,
}

/// A request's answer.
struct Answer {
    status: u16,
    body: Value,
}

impl Gateway {
    fn start() -> Option<Self> {
        node_packages(&providers_dir(), "stripe")?;
        let python = python()?;
        let target_secrets: Vec<String> = (0..TARGET_SECRETS)
            .map(|_| Secret::generate().to_string())
            .collect();
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/crosscheck/ingest_target.py"
        );
        let mut command = Command::new(python);
        command.arg(script).args(&target_secrets);
        let target = Announced::start(command);
        let dir = tempfile::tempdir().unwrap();
        let database = format!("sqlite://{}", dir.path().join("hookd.db").display());
        let hookd = Hookd::serve_local(&database, TOKEN, &[]);
        let api = Api::new(&hookd, TOKEN);
        let ingest = api.at_root();
        Some(Self {
            _dir: dir,
            _hookd: hookd,
            api,
            ingest,
            target,
            target_secrets,
            sources_made: Default::default(),
            client: reqwest::Client::new(),
        })
    }

    /// A source of `kind` checking with `secret`, forwarding to the target.
    async fn source(&self, kind: &str, secret: &str) -> Source {
        let body = json!({ "name": kind, "type": kind, "config": { "secret": secret } });
        let (status, source) = self.ingest.post(INGEST, body).await.unwrap();
        assert_eq!(status, 201, "{source}");
        let id = source["id"].as_str().unwrap().to_owned();
        let made = self
            .sources_made
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let secret = &self.target_secrets[made];
        let endpoint = json!({ "url": self.target.url, "secret": secret });
        let (status, answer) = self
            .ingest
            .post(&format!("{INGEST}/{id}/endpoint"), endpoint)
            .await
            .unwrap();
        assert_eq!(status, 201, "{answer}");
        Source {
            url: source["ingestUrl"].as_str().unwrap().to_owned(),
            id,
        }
    }

    /// POSTs `body` with `headers` to the source, as a provider would.
    async fn send(&self, source: &Source, headers: &[(String, String)], body: &str) -> Answer {
        let mut request = self
            .client
            .post(&source.url)
            .header("content-type", "application/json")
            .body(body.to_owned());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        Answer {
            status: response.status().as_u16(),
            body: response.json().await.unwrap_or(Value::Null),
        }
    }

    /// Sends a signed request that must be accepted; the id of the message it became.
    async fn accepted(&self, source: &Source, headers: &[(String, String)], body: &str) -> String {
        let answer = self.send(source, headers, body).await;
        assert_eq!(answer.status, 202, "{}", answer.body);
        answer.body["id"].as_str().unwrap().to_owned()
    }

    /// Every request the target got, as it printed them.
    fn received(&self) -> Vec<Value> {
        self.target
            .output()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// Waits for message `msg` at the target; asserts it arrived once, verified by the
    /// reference library, with `body`'s exact bytes.
    async fn forwarded_once(&self, msg: &str, body: &str) {
        eventually(async || {
            let seen = self
                .received()
                .into_iter()
                .filter(|r| r["id"] == msg)
                .count();
            if seen > 0 {
                Ok(())
            } else {
                Err(format!("{msg} never reached the target"))
            }
        })
        .await;
        let arrivals: Vec<Value> = self
            .received()
            .into_iter()
            .filter(|r| r["id"] == msg)
            .collect();
        assert_eq!(arrivals.len(), 1, "{msg} arrived {} times", arrivals.len());
        assert_eq!(arrivals[0]["verified"], true, "{}", arrivals[0]);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(arrivals[0]["body"].as_str().unwrap())
            .unwrap();
        assert_eq!(bytes, body.as_bytes(), "the forwarded body differs");
    }

    /// The message `msg` of `source`, as the source's request record and the API show it.
    async fn message(&self, source: &Source, msg: &str) -> Value {
        let requests = self
            .ingest
            .get_all(&format!("{INGEST}/{}/request", source.id))
            .await;
        let request = requests
            .iter()
            .find(|r| r["msgId"] == msg)
            .unwrap_or_else(|| panic!("no request record of {msg}: {requests:?}"));
        let app = request["appId"].as_str().unwrap();
        let message = self.api.get(&format!("/app/{app}/msg/{msg}")).await;
        assert_eq!(message["eventType"], request["eventType"]);
        message
    }

    /// How many messages `source` accepted.
    async fn accepted_count(&self, source: &Source) -> usize {
        self.ingest
            .get_all(&format!("{INGEST}/{}/request", source.id))
            .await
            .len()
    }
}

/// A Stripe event as Stripe sends it.
fn stripe_event(id: &str) -> String {
    json!({
        "id": id,
        "object": "event",
        "type": "payment_intent.succeeded",
        "data": { "object": { "id": "pi_3MtwBwLkdIwHu7ix28a3tqPa", "amount": 2000, "currency": "usd" } },
    })
    .to_string()
}

#[tokio::test]
async fn stripe_events_signed_by_stripe_are_forwarded_and_verified() {
    let Some(gateway) = Gateway::start() else {
        return;
    };
    let secret = "whsec_test_4eC39HqLyjWDarjtT1zdp7dc";
    let source = gateway.source("stripe", secret).await;
    let body = stripe_event("evt_1NG8Du2eZvKYlo2CUI79vXWy");
    let headers = signed("stripe", secret, &body, unix_now(), "");
    let msg = gateway.accepted(&source, &headers, &body).await;
    gateway.forwarded_once(&msg, &body).await;
    let message = gateway.message(&source, &msg).await;
    assert_eq!(message["eventType"], "payment_intent.succeeded");
    assert_eq!(message["eventId"], "evt_1NG8Du2eZvKYlo2CUI79vXWy");
}

#[tokio::test]
async fn github_deliveries_signed_by_octokit_are_forwarded_and_verified() {
    let Some(gateway) = Gateway::start() else {
        return;
    };
    let secret = "It's a Secret to Everybody";
    let source = gateway.source("github", secret).await;
    let body = json!({"zen": "Keep it logically awesome.", "hook_id": 109948940}).to_string();
    let mut headers = signed("github", secret, &body, 0, "");
    headers.push(("X-GitHub-Event".into(), "ping".into()));
    headers.push((
        "X-GitHub-Delivery".into(),
        "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
    ));
    let msg = gateway.accepted(&source, &headers, &body).await;
    gateway.forwarded_once(&msg, &body).await;
    let message = gateway.message(&source, &msg).await;
    assert_eq!(message["eventType"], "ping");
    assert_eq!(message["eventId"], "72d3162e-cc78-11e3-81ab-4c9367dc0958");
}

#[tokio::test]
async fn standard_webhooks_signed_by_the_reference_library_are_forwarded_and_verified() {
    let Some(gateway) = Gateway::start() else {
        return;
    };
    let secret = Secret::generate().to_string();
    let source = gateway.source("svix", &secret).await;
    let body = r#"{"type":"invoice.paid","data":{"id":"in_1","amount":"12.00 €"}}"#;
    let headers = signed(
        "standardwebhooks",
        &secret,
        body,
        unix_now(),
        "msg_2LvZVtnHCGHlXGXQ0fAM8l8bvKK",
    );
    let msg = gateway.accepted(&source, &headers, body).await;
    gateway.forwarded_once(&msg, body).await;
    let message = gateway.message(&source, &msg).await;
    assert_eq!(message["eventType"], "invoice.paid");
    assert_eq!(message["eventId"], "msg_2LvZVtnHCGHlXGXQ0fAM8l8bvKK");
}

/// Each provider's request spoiled four ways: each refused with its reason, none kept or
/// forwarded; a good request sent after them is the only one the target gets.
#[tokio::test]
async fn tampered_stale_wrongly_keyed_and_unsigned_requests_are_refused_and_never_forwarded() {
    let Some(gateway) = Gateway::start() else {
        return;
    };
    let now = unix_now();
    let cases = [
        (
            "stripe",
            "stripe",
            "whsec_stripe_secret".to_owned(),
            stripe_event("evt_bad"),
        ),
        (
            "github",
            "github",
            "github secret".to_owned(),
            r#"{"zen":"bad"}"#.to_owned(),
        ),
        (
            "svix",
            "standardwebhooks",
            Secret::generate().to_string(),
            r#"{"type":"bad"}"#.to_owned(),
        ),
    ];
    for (kind, scheme, secret, body) in cases {
        let source = gateway.source(kind, &secret).await;
        let other = match scheme {
            "standardwebhooks" => Secret::generate().to_string(),
            _ => format!("{secret}-other"),
        };
        let good = signed(scheme, &secret, &body, now, "msg_bad");
        let mut spoiled = vec![
            ("bad_signature", good.clone(), format!("{body} ")),
            (
                "bad_signature",
                signed(scheme, &other, &body, now, "msg_bad"),
                body.clone(),
            ),
            ("missing_signature", Vec::new(), body.clone()),
        ];
        if scheme != "github" {
            let stale = signed(scheme, &secret, &body, now - 400, "msg_bad");
            spoiled.push(("stale_timestamp", stale, body.clone()));
        }
        for (reason, headers, sent) in &spoiled {
            let answer = gateway.send(&source, headers, sent).await;
            assert_eq!(answer.status, 401, "{kind} {reason}: {}", answer.body);
            assert_eq!(answer.body["reason"], *reason, "{kind}: {}", answer.body);
        }
        assert_eq!(gateway.accepted_count(&source).await, 0, "{kind}");
        let rejections = gateway
            .ingest
            .get_all(&format!("{INGEST}/{}/rejection", source.id))
            .await;
        assert_eq!(rejections.len(), spoiled.len(), "{kind}: {rejections:?}");

        let msg = gateway.accepted(&source, &good, &body).await;
        gateway.forwarded_once(&msg, &body).await;
    }
    // Three good requests in all reached the target, and nothing else.
    assert_eq!(gateway.received().len(), 3, "{:?}", gateway.received());
}

/// The same event sent twice (re-signed, as a provider's retry is): the second is answered
/// 200 as a duplicate, and the target gets the event once.
#[tokio::test]
async fn a_repeated_provider_event_is_forwarded_once() {
    let Some(gateway) = Gateway::start() else {
        return;
    };
    let stripe_secret = "whsec_stripe_secret";
    let stripe = gateway.source("stripe", stripe_secret).await;
    let github = gateway.source("github", "github secret").await;
    let svix_secret = Secret::generate().to_string();
    let svix = gateway.source("svix", &svix_secret).await;

    let event = stripe_event("evt_repeated");
    let push = r#"{"ref":"refs/heads/main"}"#;
    let sw = r#"{"type":"user.created"}"#;
    let delivery = |headers: Vec<(String, String)>| {
        let mut headers = headers;
        headers.push(("X-GitHub-Event".into(), "push".into()));
        headers.push((
            "X-GitHub-Delivery".into(),
            "d1e2f3a4-0000-11e3-81ab-4c9367dc0958".into(),
        ));
        headers
    };
    let requests = [
        (&stripe, event.as_str(), "stripe", stripe_secret),
        (&github, push, "github", "github secret"),
        (&svix, sw, "standardwebhooks", svix_secret.as_str()),
    ];
    for (source, body, scheme, secret) in requests {
        let sign = |at| {
            let headers = signed(scheme, secret, body, at, "msg_repeated");
            if scheme == "github" {
                delivery(headers)
            } else {
                headers
            }
        };
        let msg = gateway.accepted(source, &sign(unix_now()), body).await;
        let again = gateway.send(source, &sign(unix_now() + 1), body).await;
        assert_eq!(again.status, 200, "{scheme}: {}", again.body);
        assert_eq!(again.body["duplicate"], true, "{scheme}: {}", again.body);
        gateway.forwarded_once(&msg, body).await;
        assert_eq!(gateway.accepted_count(source).await, 1, "{scheme}");
    }
    let bodies: Vec<Value> = gateway
        .received()
        .iter()
        .map(|r| r["body"].clone())
        .collect();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
}
