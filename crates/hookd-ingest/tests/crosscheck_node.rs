//! Cross-check against the providers' own signing code, not ours: requests signed by npm
//! `stripe` (`generateTestHeaderString`), `@octokit/webhooks-methods` (`sign`) and
//! `standardwebhooks` (`Webhook.sign`), and by Shopify's and Slack's documented algorithms in
//! `node:crypto` (neither publishes a signing helper), run by
//! `scripts/crosscheck/providers-js/sign.mjs`. Each is accepted; the same request tampered,
//! late, checked with another secret or stripped of its signature is refused with its reason.
//! Skipped without Node and npm, unless `HOOKD_TEST_REQUIRE_NODE=1`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hookd_ingest::{Accepted, InboundRequest, RejectReason, SourceConfig};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};
use webhook_signature::Secret;

/// Cases a provider, random bodies and secrets beside the realistic ones.
const RANDOM_CASES: usize = 40;
/// "Now" of every case (signed timestamps are relative to it).
const NOW: i64 = 1_700_000_000;

/// The npm project holding the providers' packages.
fn providers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/crosscheck/providers-js")
}

/// Whether Node can run the signer (installing the packages from the committed lockfile when
/// they are missing); `false` after saying so when the test is to be skipped.
fn node_ready() -> bool {
    let runs = |program: &str| {
        Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !runs("node") || !runs("npm") {
        assert!(
            std::env::var("HOOKD_TEST_REQUIRE_NODE").as_deref() != Ok("1"),
            "node and npm are not on PATH, and HOOKD_TEST_REQUIRE_NODE=1 requires them"
        );
        let _ = writeln!(std::io::stderr(), "SKIPPED: node or npm not on PATH");
        return false;
    }
    let dir = providers_dir();
    // Other test processes may install at the same time: the lock on the lockfile orders them.
    let lockfile = std::fs::File::open(dir.join("package-lock.json")).unwrap();
    lockfile.lock().unwrap();
    if !dir.join("node_modules/stripe").exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "npm ci in {} failed", dir.display());
    }
    true
}

/// One request to sign: the signer's scheme name, hookd's source type, the secret, the body,
/// the signed timestamp and (Standard Webhooks) the message id.
#[derive(Debug, Clone)]
struct Case {
    scheme: &'static str,
    kind: &'static str,
    secret: String,
    body: String,
    timestamp: i64,
    id: String,
}

impl Case {
    fn to_json(&self) -> Value {
        json!({
            "scheme": self.scheme,
            "secret": self.secret,
            "body": self.body,
            "timestamp": self.timestamp,
            "id": self.id,
        })
    }

    fn source(&self, secret: &str) -> SourceConfig {
        SourceConfig::parse(self.kind, &json!({ "secret": secret })).unwrap()
    }

    /// Whether the scheme signs a timestamp (and so refuses a late request).
    fn timed(&self) -> bool {
        !matches!(self.scheme, "github" | "shopify")
    }
}

/// Signs `cases` with the providers' libraries; the signature headers of each, in order.
fn sign(cases: &[Case]) -> Vec<http::HeaderMap> {
    let cases_json: Vec<Value> = cases.iter().map(Case::to_json).collect();
    let mut node = Command::new("node")
        .arg(providers_dir().join("sign.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = node.stdin.take().unwrap();
    stdin
        .write_all(Value::from(cases_json).to_string().as_bytes())
        .unwrap();
    drop(stdin);
    let output = node.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "sign.mjs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let signed: Vec<serde_json::Map<String, Value>> =
        serde_json::from_slice(&output.stdout).unwrap();
    signed
        .into_iter()
        .map(|headers| {
            headers
                .into_iter()
                .map(|(name, value)| {
                    (
                        name.parse().unwrap(),
                        value.as_str().unwrap().parse().unwrap(),
                    )
                })
                .collect()
        })
        .collect()
}

/// Realistic requests of each provider, with their event ids and types in the body.
fn realistic() -> Vec<Case> {
    let case = |scheme, kind, secret: &str, body: &str| Case {
        scheme,
        kind,
        secret: secret.to_owned(),
        body: body.to_owned(),
        timestamp: NOW - 5,
        id: "msg_2LvZVtnHCGHlXGXQ0fAM8l8bvKK".to_owned(),
    };
    vec![
        case(
            "stripe",
            "stripe",
            "whsec_test_4eC39HqLyjWDarjtT1zdp7dc",
            r#"{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount":2000}}}"#,
        ),
        case(
            "github",
            "github",
            "It's a Secret to Everybody",
            r#"{"zen":"Keep it logically awesome.","hook_id":1}"#,
        ),
        case(
            "standardwebhooks",
            "svix",
            &Secret::generate().to_string(),
            r#"{"type":"invoice.paid","data":{"id":"in_1","amount":"12.00 €"}}"#,
        ),
        case(
            "shopify",
            "shopify",
            "shpss_0123456789abcdef",
            r#"{"id":820982911946154508,"email":"jon@doe.ca"}"#,
        ),
        case(
            "slack",
            "slack",
            "8f742231b10e8888abcd99yyyzzz85a5",
            r#"{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention","text":"<@U0LAN0Z89> is it everything a river should be?"}}"#,
        ),
    ]
}

/// Random bodies (any printable text), secrets and timestamps in the window.
fn random() -> Vec<Case> {
    let schemes = [
        ("stripe", "stripe"),
        ("github", "github"),
        ("standardwebhooks", "clerk"),
        ("shopify", "shopify"),
        ("slack", "slack"),
    ];
    let strategy = prop::collection::vec(
        (
            "[A-Za-z0-9_]{8,40}",
            prop::collection::vec(any::<u8>(), 24..=64),
            // Octokit refuses to sign an empty payload.
            "\\PC{1,300}",
            -300i64..=300,
            "[A-Za-z0-9_-]{1,40}",
        ),
        RANDOM_CASES,
    );
    let values = strategy
        .new_tree(&mut TestRunner::deterministic())
        .unwrap()
        .current();
    let mut cases = Vec::new();
    for (scheme, kind) in schemes {
        for (text_secret, key, body, skew, id) in &values {
            let secret = match scheme {
                "standardwebhooks" => Secret::from_bytes(key.clone()).to_string(),
                "stripe" => format!("whsec_{text_secret}"),
                _ => text_secret.clone(),
            };
            cases.push(Case {
                scheme,
                kind,
                secret,
                body: body.clone(),
                timestamp: NOW + skew,
                id: id.clone(),
            });
        }
    }
    cases
}

fn check(
    case: &Case,
    source: &SourceConfig,
    headers: &http::HeaderMap,
    body: &str,
    now: i64,
) -> Result<Accepted, RejectReason> {
    source
        .verify(&InboundRequest {
            headers,
            body: body.as_bytes(),
            now,
        })
        .map_err(|rejection| {
            assert!(!rejection.detail.contains(&case.secret), "{rejection}");
            rejection.reason
        })
}

#[test]
fn requests_signed_by_the_providers_libraries_verify() {
    if !node_ready() {
        return;
    }
    let cases: Vec<Case> = realistic().into_iter().chain(random()).collect();
    let signed = sign(&cases);
    assert_eq!(signed.len(), cases.len());
    for (case, headers) in cases.iter().zip(&signed) {
        let source = case.source(&case.secret);
        let accepted = check(case, &source, headers, &case.body, NOW);
        assert!(accepted.is_ok(), "{case:?}: {accepted:?}");
    }
}

#[test]
fn the_providers_events_are_read() {
    if !node_ready() {
        return;
    }
    let cases = realistic();
    let signed = sign(&cases);
    let read: Vec<_> = cases
        .iter()
        .zip(&signed)
        .map(|(case, headers)| check(case, &case.source(&case.secret), headers, &case.body, NOW))
        .collect();
    let event = |id: Option<&str>, kind: &str| {
        Ok(Accepted::Event {
            event_id: id.map(str::to_owned),
            event_type: kind.to_owned(),
        })
    };
    assert_eq!(
        read,
        [
            event(
                Some("evt_1NG8Du2eZvKYlo2CUI79vXWy"),
                "payment_intent.succeeded"
            ),
            // GitHub's id and type travel in headers the signature does not cover.
            event(None, "github"),
            event(Some("msg_2LvZVtnHCGHlXGXQ0fAM8l8bvKK"), "invoice.paid"),
            event(None, "shopify"),
            event(Some("Ev08MFMKH6"), "app_mention"),
        ]
    );
}

#[test]
fn bad_requests_signed_by_the_providers_libraries_are_refused() {
    if !node_ready() {
        return;
    }
    let cases: Vec<Case> = realistic().into_iter().chain(random()).collect();
    let signed = sign(&cases);
    for (case, headers) in cases.iter().zip(&signed) {
        let source = case.source(&case.secret);
        let tampered = format!("{} ", case.body);
        assert_eq!(
            check(case, &source, headers, &tampered, NOW).err(),
            Some(RejectReason::BadSignature),
            "tampered {case:?}"
        );
        let stranger = case.source(&match case.scheme {
            "standardwebhooks" => Secret::generate().to_string(),
            _ => format!("{}x", case.secret),
        });
        assert_eq!(
            check(case, &stranger, headers, &case.body, NOW).err(),
            Some(RejectReason::BadSignature),
            "wrong key {case:?}"
        );
        let unsigned = http::HeaderMap::new();
        assert_eq!(
            check(case, &source, &unsigned, &case.body, NOW).err(),
            Some(RejectReason::MissingSignature),
            "unsigned {case:?}"
        );
        if case.timed() {
            let late = case.timestamp + 301;
            assert_eq!(
                check(case, &source, headers, &case.body, late).err(),
                Some(RejectReason::StaleTimestamp),
                "stale {case:?}"
            );
        }
    }
}
