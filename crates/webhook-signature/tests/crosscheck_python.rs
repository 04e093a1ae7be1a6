//! Cross-check against the reference Python library `standardwebhooks` (run by
//! `scripts/crosscheck/standardwebhooks_check.py` under `$HOOKD_TEST_PYTHON`): it verifies a few
//! hundred messages we signed (and rejects the tampered ones), and signs messages for us to
//! verify. Skipped when `HOOKD_TEST_PYTHON` is unset, unless `HOOKD_TEST_REQUIRE_PYTHON=1`.

use std::io::Write as _;
use std::process::Command;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};
use webhook_signature::{
    Ed25519SecretKey, Secret, Signer, SigningKey, Verifier, WebhookHeaders, clock,
};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scripts/crosscheck/standardwebhooks_check.py"
);
const CASES: usize = 300;
const PYTHON_SIGNS: usize = 200;

/// The interpreter to use, or `None` (after saying so) when the test is to be skipped.
fn python() -> Option<String> {
    match std::env::var("HOOKD_TEST_PYTHON") {
        Ok(python) if !python.is_empty() => Some(python),
        _ if std::env::var("HOOKD_TEST_REQUIRE_PYTHON").as_deref() == Ok("1") => {
            panic!("HOOKD_TEST_PYTHON not set, and HOOKD_TEST_REQUIRE_PYTHON=1 requires it")
        }
        _ => {
            // Written to the real stderr, past the test harness's capture, so it is seen.
            let _ = writeln!(std::io::stderr(), "SKIPPED: HOOKD_TEST_PYTHON not set");
            None
        }
    }
}

/// One message we sign: the key Python verifies with, whether to add a v1a entry and another
/// HMAC key's entry beside it (rotation), and whether to tamper with the body afterwards.
fn message() -> impl Strategy<Value = (Vec<u8>, String, String, bool, bool)> {
    (
        prop::collection::vec(any::<u8>(), 24..=64),
        "[A-Za-z0-9_-]{1,40}",
        prop_oneof![Just(String::new()), "\\PC{0,300}"],
        any::<bool>(),
        any::<bool>(),
    )
}

fn case(secret: &Secret, headers: &WebhookHeaders, body: &str) -> Value {
    json!({
        "secret": secret.to_string(),
        "id": headers.id,
        "timestamp": headers.timestamp,
        "body": body,
        "signature": headers.signature,
    })
}

#[test]
fn reference_python_library_agrees() {
    let Some(python) = python() else { return };
    let strategy = prop::collection::vec(message(), CASES);
    let messages = strategy
        .new_tree(&mut TestRunner::deterministic())
        .unwrap()
        .current();

    let now = clock::unix_now();
    let mut expected = Vec::new();
    let mut cases = Vec::new();
    for (secret, id, body, rotating, tamper) in messages {
        let secret = Secret::from_bytes(secret);
        let mut keys = vec![SigningKey::Hmac(secret.clone())];
        if rotating {
            keys.insert(0, SigningKey::Ed25519(Ed25519SecretKey::generate()));
            keys.insert(0, SigningKey::Hmac(Secret::generate()));
        }
        let headers = Signer::new(keys)
            .headers(&id, now, body.as_bytes())
            .unwrap();
        let body = if tamper { format!("{body} ") } else { body };
        cases.push(case(&secret, &headers, &body));
        expected.push(!tamper);
    }

    let path = std::env::temp_dir().join(format!("hookd-crosscheck-{}.json", std::process::id()));
    std::fs::write(
        &path,
        json!({"verify": cases, "sign": PYTHON_SIGNS}).to_string(),
    )
    .unwrap();
    let output = Command::new(&python)
        .arg(SCRIPT)
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(
        output.status.success(),
        "{python} {SCRIPT} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();

    let verified: Vec<bool> = serde_json::from_value(answer["verified"].clone()).unwrap();
    let disagreements: Vec<_> = (0..CASES)
        .filter(|&i| verified[i] != expected[i])
        .map(|i| (&cases[i], expected[i]))
        .collect();
    assert!(
        disagreements.is_empty(),
        "Python disagrees on (case, expected): {disagreements:#?}"
    );
    assert!(expected.iter().any(|&ok| ok) && expected.iter().any(|&ok| !ok));

    let signed = answer["signed"].as_array().unwrap();
    assert_eq!(signed.len(), PYTHON_SIGNS);
    for case in signed {
        let field = |name: &str| case[name].as_str().unwrap();
        let secret = Secret::parse_endpoint(field("secret")).unwrap();
        let headers = [
            ("Webhook-Id", field("id")),
            ("Webhook-Timestamp", field("timestamp")),
            ("Webhook-Signature", field("signature")),
        ];
        assert_eq!(
            Verifier::new(secret).verify(field("body").as_bytes(), headers),
            Ok(()),
            "{case}"
        );
    }
}
