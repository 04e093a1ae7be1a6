//! Secret rotation end to end: real deliveries from the engine to a loopback receiver, made
//! before, during and after a rotation's overlap window on a clock the test moves, verified by
//! the reference Python library `standardwebhooks` (code we did not write, run by
//! `scripts/crosscheck/rotation_check.py` under `$HOOKD_TEST_PYTHON`). Skipped when
//! `HOOKD_TEST_PYTHON` is unset, unless `HOOKD_TEST_REQUIRE_PYTHON=1`.

mod common;

use std::io::Write as _;
use std::process::Command;
use std::time::Duration;

use axum::http::StatusCode;
use common::{Harness, Receiver};
use hookd_core::Clock;
use hookd_core::model::{DeliveryStatus, Endpoint};
use hookd_engine::testing::{Received, python};
use hookd_vault::{EndpointKeys, Scheme};
use serde_json::{Value, json};
use webhook_signature::{Secret, SigningKey, Verifier, VerifyingKey};

const DAY: Duration = Duration::from_secs(24 * 3600);

/// Rotates the endpoint's keys as the API does: open, rotate, seal, swap if unchanged.
async fn rotate(h: &Harness, endpoint: &Endpoint, new: SigningKey, overlap: Duration) {
    let stored = h
        .store
        .get_endpoint(&h.app.id, endpoint.id.as_str())
        .await
        .unwrap()
        .unwrap();
    let mut keys = EndpointKeys::open(&h.keyring, &stored.id, &stored.keys).unwrap();
    keys.rotate(&new, h.clock.now(), overlap);
    let sealed = keys.seal(&h.keyring, &stored.id);
    let swapped = h
        .store
        .replace_endpoint_keys(&stored.id, &stored.keys, &sealed, h.clock.now())
        .await
        .unwrap();
    assert!(swapped, "nobody else changed the keys");
}

/// Publishes the `n`-th message (from 0) to `endpoint` and returns the request the receiver
/// got for it, once the attempt is recorded (moving the clock before would let the claim's
/// lease run out and send it again).
async fn deliver(h: &Harness, receiver: &Receiver, endpoint: &Endpoint, n: usize) -> Received {
    let message = h.publish(&format!(r#"{{"n": {n}}}"#)).await;
    h.wait_for_status(&message, endpoint, DeliveryStatus::Success)
        .await;
    let requests = receiver.requests();
    assert_eq!(requests.len(), n + 1, "one request per message");
    requests[n].clone()
}

fn case(request: &Received) -> Value {
    json!({
        "id": request.header("webhook-id"),
        "timestamp": request.header("webhook-timestamp"),
        "body": String::from_utf8(request.body.to_vec()).unwrap(),
        "signature": request.header("webhook-signature"),
    })
}

/// Which deliveries the reference library accepts under the `old` and the `new` secret.
fn reference_verdicts(python: &str, old: &Secret, new: &Secret, requests: &[Received]) -> Value {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let cases = json!({
        "secrets": {"old": old.to_string(), "new": new.to_string()},
        "deliveries": requests.iter().map(case).collect::<Vec<_>>(),
    });
    file.write_all(cases.to_string().as_bytes()).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/crosscheck/rotation_check.py"
    );
    let output = Command::new(python)
        .arg(script)
        .arg(file.path())
        .output()
        .expect("run python");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test]
async fn old_secret_verifies_before_and_during_the_overlap_new_secret_during_and_after() {
    let Some(python) = python() else { return };
    let receiver = Receiver::always(StatusCode::NO_CONTENT).await;
    let h = Harness::start(Harness::config()).await;
    let (old, new) = (Secret::generate(), Secret::generate());
    let keys = EndpointKeys::new(&[Scheme::V1], Some(old.clone())).unwrap();
    let endpoint = h.endpoint_with_keys(&receiver.url, &keys).await;

    let before = deliver(&h, &receiver, &endpoint, 0).await;
    rotate(&h, &endpoint, SigningKey::Hmac(new.clone()), DAY).await;
    h.advance(Duration::from_secs(60));
    let just_after_rotating = deliver(&h, &receiver, &endpoint, 1).await;
    h.advance(DAY - Duration::from_secs(120));
    let end_of_overlap = deliver(&h, &receiver, &endpoint, 2).await;
    h.advance(Duration::from_secs(120));
    let after = deliver(&h, &receiver, &endpoint, 3).await;

    let requests = [before, just_after_rotating, end_of_overlap, after];
    let entries: Vec<usize> = requests
        .iter()
        .map(|r| r.header("webhook-signature").split(' ').count())
        .collect();
    assert_eq!(
        entries,
        [1, 2, 2, 1],
        "both signatures only during the overlap"
    );
    let verdicts = reference_verdicts(&python, &old, &new, &requests);
    assert_eq!(
        verdicts["old"],
        json!([true, true, true, false]),
        "old secret"
    );
    assert_eq!(
        verdicts["new"],
        json!([false, true, true, true]),
        "new secret"
    );
}

#[tokio::test]
async fn an_ed25519_endpoint_signs_v1a_beside_v1_verifiable_with_the_public_key_alone() {
    let receiver = Receiver::always(StatusCode::NO_CONTENT).await;
    let h = Harness::start(Harness::config()).await;
    let keys = EndpointKeys::new(&[Scheme::V1, Scheme::V1a], None).unwrap();
    let public = keys.public_key().unwrap();
    let endpoint = h.endpoint_with_keys(&receiver.url, &keys).await;

    let request = deliver(&h, &receiver, &endpoint, 0).await;
    let signature = request.header("webhook-signature");
    assert!(
        signature.contains("v1,") && signature.contains("v1a,"),
        "{signature}"
    );
    let now = h.clock.now().as_secs() as u64;
    let headers: Vec<(&str, &str)> = ["webhook-id", "webhook-timestamp", "webhook-signature"]
        .into_iter()
        .map(|name| (name, request.header(name)))
        .collect();
    Verifier::with_keys([VerifyingKey::Ed25519(public)])
        .now(now)
        .verify(&request.body, headers.clone())
        .expect("the whpk_ public key verifies the v1a entry");
    let stranger = EndpointKeys::new(&[Scheme::V1a], None).unwrap();
    assert!(
        Verifier::with_keys([VerifyingKey::Ed25519(stranger.public_key().unwrap())])
            .now(now)
            .verify(&request.body, headers)
            .is_err()
    );
}
