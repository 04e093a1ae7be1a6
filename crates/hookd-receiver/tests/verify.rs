//! The extractor and the layer over real HTTP on loopback: verified requests reach the
//! handler with their exact bytes; everything else is refused with 401 and a JSON reason
//! before the handler (and any JSON parsing) runs. Standard Webhooks v1 and v1a, rotation,
//! Stripe and GitHub.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{DefaultBodyLimit, State};
use axum::routing::post;
use axum::{Extension, Router};
use hookd_receiver::{Scheme, VerifyLayer, Webhook, WebhookVerifier};
use serde_json::{Value, json};
use webhook_signature::{Ed25519SecretKey, Secret, Signer, SigningKey, clock, github, stripe};

/// Serves `router` on a free loopback port; returns `http://addr`.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    url
}

/// A router whose handler takes the `Webhook` extractor, counts its calls and echoes what it
/// got; and the call counter.
async fn extractor_receiver(verifier: WebhookVerifier) -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let handler = move |State(_): State<WebhookVerifier>, webhook: Webhook| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { axum::Json(echo(&webhook)) }
    };
    let router = Router::new()
        .route("/hook", post(handler))
        .layer(DefaultBodyLimit::max(1024))
        .with_state(verifier);
    (serve(router).await, calls)
}

fn echo(webhook: &Webhook) -> Value {
    json!({
        "id": webhook.id,
        "timestamp": webhook.timestamp,
        "scheme": format!("{:?}", webhook.scheme),
        "body": String::from_utf8_lossy(&webhook.body),
    })
}

async fn post_raw(url: &str, headers: &[(&str, String)], body: &[u8]) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{url}/hook"))
        .body(body.to_vec());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn standard_headers(
    keys: Vec<SigningKey>,
    id: &str,
    ts: u64,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    let headers = Signer::new(keys).headers(id, ts, body).unwrap();
    headers.pairs().map(|(n, v)| (n, v.to_owned())).to_vec()
}

#[tokio::test]
async fn a_signed_request_reaches_the_handler_with_its_exact_bytes() {
    let secret = Secret::generate();
    let (url, calls) = extractor_receiver(WebhookVerifier::standard([secret.clone().into()])).await;
    // Not JSON at all: verification must not care, the bytes are what is signed.
    let body = b"  {\"orderId\":1003, \"x\": \"\\u00e9\"}  not json";
    let headers = standard_headers(vec![secret.into()], "msg_1", clock::unix_now(), body);
    let (status, got) = post_raw(&url, &headers, body).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["id"], "msg_1");
    assert_eq!(got["scheme"], "StandardWebhooks");
    assert_eq!(got["body"], String::from_utf8_lossy(body).as_ref());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn failures_are_401_with_the_reason_and_never_reach_the_handler() {
    let secret = Secret::generate();
    let other = Secret::generate();
    // "Now" pinned: the ±300 s edges must not move while the test runs.
    let now = clock::unix_now();
    let verifier = WebhookVerifier::standard([secret.clone().into()]).now(now);
    let (url, calls) = extractor_receiver(verifier).await;
    let body = br#"{"a":1}"#;
    let good = standard_headers(vec![secret.clone().into()], "msg_1", now, body);
    // (case, headers, body, the reason's start)
    type Case<'a> = (&'a str, Vec<(&'a str, String)>, &'a [u8], &'a str);
    let cases: Vec<Case> = vec![
        (
            "wrong secret",
            standard_headers(vec![other.into()], "msg_1", now, body),
            body,
            "no matching signature",
        ),
        (
            "tampered body",
            good.clone(),
            br#"{"a":2}"#,
            "no matching signature",
        ),
        (
            "missing signature",
            good[..2].to_vec(),
            body,
            "missing header webhook-signature",
        ),
        ("no headers", vec![], body, "missing header webhook-id"),
        (
            "old timestamp",
            standard_headers(vec![secret.clone().into()], "msg_1", now - 301, body),
            body,
            "timestamp too old",
        ),
        (
            "future timestamp",
            standard_headers(vec![secret.clone().into()], "msg_1", now + 301, body),
            body,
            "timestamp too new",
        ),
        (
            "id swapped",
            vec![
                ("webhook-id", "msg_2".into()),
                good[1].clone(),
                good[2].clone(),
            ],
            body,
            "no matching signature",
        ),
        (
            "bad JSON, bad signature: 401, not a JSON error",
            good.clone(),
            b"{not json",
            "no matching signature",
        ),
    ];
    for (case, headers, body, reason) in cases {
        let (status, got) = post_raw(&url, &headers, body).await;
        assert_eq!(status, 401, "{case}: {got}");
        assert_eq!(got["error"], "unverified", "{case}");
        let text = got["reason"].as_str().unwrap();
        assert!(text.starts_with(reason), "{case}: {text}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn any_of_several_keys_verifies_during_a_rotation_and_v1a_too() {
    let old = Secret::generate();
    let new = Secret::generate();
    let ed = Ed25519SecretKey::generate();
    let verifier = WebhookVerifier::standard_from_strs([
        old.to_string(),
        new.to_string(),
        ed.public_key().to_string(),
    ])
    .unwrap();
    let (url, calls) = extractor_receiver(verifier).await;
    let body = br#"{"rotating":true}"#;
    let now = clock::unix_now();
    for keys in [
        vec![old.clone().into()],
        vec![new.clone().into()],
        vec![SigningKey::Ed25519(ed.clone())],
        vec![Secret::generate().into(), new.clone().into()],
    ] {
        let (status, got) = post_raw(&url, &standard_headers(keys, "msg_r", now, body), body).await;
        assert_eq!(status, 200, "{got}");
    }
    let (status, _) = post_raw(
        &url,
        &standard_headers(
            vec![SigningKey::Ed25519(Ed25519SecretKey::generate())],
            "msg_r",
            now,
            body,
        ),
        body,
    )
    .await;
    assert_eq!(status, 401, "a v1a signature by another key");
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn stripe_and_github_schemes_with_rotation() {
    let body = br#"{"id":"evt_9f2c","type":"consignment.delivered"}"#;
    let now = clock::unix_now();
    let stripe_verifier = WebhookVerifier::stripe(["whsec_old", "whsec_new"]).now(now);
    let (url, _) = extractor_receiver(stripe_verifier).await;
    let (status, got) = post_raw(
        &url,
        &[(stripe::HEADER, stripe::sign("whsec_new", now, body))],
        body,
    )
    .await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(
        (got["id"].clone(), got["timestamp"].clone()),
        (json!("evt_9f2c"), json!(now))
    );
    for (case, header) in [
        ("unknown secret", stripe::sign("whsec_x", now, body)),
        ("too old", stripe::sign("whsec_old", now - 301, body)),
        ("too new", stripe::sign("whsec_old", now + 301, body)),
    ] {
        let (status, got) = post_raw(&url, &[(stripe::HEADER, header)], body).await;
        assert_eq!(status, 401, "stripe {case}: {got}");
    }
    let (status, got) = post_raw(&url, &[], body).await;
    assert_eq!(
        (status, got["reason"].clone()),
        (401, json!("missing header stripe-signature"))
    );

    let (url, _) = extractor_receiver(WebhookVerifier::github(["gh-old", "gh-new"])).await;
    let delivery = (
        "x-github-delivery",
        "72d3162e-cc78-11e3-81ab-4c9367dc0958".to_owned(),
    );
    let (status, got) = post_raw(
        &url,
        &[
            (github::HEADER, github::sign("gh-old", body)),
            delivery.clone(),
        ],
        body,
    )
    .await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["id"], delivery.1);
    assert_eq!(got["scheme"], "GitHub");
    let (status, got) = post_raw(
        &url,
        &[(github::HEADER, github::sign("gh-other", body)), delivery],
        body,
    )
    .await;
    assert_eq!(
        (status, got["reason"].clone()),
        (401, json!("no matching signature"))
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_a_json_reason() {
    let secret = Secret::generate();
    let (url, calls) = extractor_receiver(WebhookVerifier::standard([secret.clone().into()])).await;
    let body = vec![b'x'; 2048];
    let headers = standard_headers(vec![secret.into()], "msg_big", clock::unix_now(), &body);
    let (status, got) = post_raw(&url, &headers, &body).await;
    assert_eq!(
        (status, got["error"].clone()),
        (413, json!("unreadable_body")),
        "{got}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_layer_guards_every_route_under_it_and_passes_the_body_on() {
    let secret = Secret::generate();
    let verifier = WebhookVerifier::standard([secret.clone().into()]);
    assert_eq!(verifier.scheme(), Scheme::StandardWebhooks);
    let handler = |Extension(webhook): Extension<Webhook>, body: axum::body::Bytes| async move {
        assert_eq!(webhook.body, body, "the handler reads the same bytes again");
        axum::Json(echo(&webhook))
    };
    let router = Router::new()
        .route("/hook", post(handler))
        .layer(VerifyLayer::new(verifier));
    let url = serve(router).await;
    let body = br#"{"via":"layer"}"#;
    let headers = standard_headers(vec![secret.into()], "msg_l", clock::unix_now(), body);
    let (status, got) = post_raw(&url, &headers, body).await;
    assert_eq!(
        (status, got["body"].clone()),
        (200, json!(r#"{"via":"layer"}"#))
    );
    let (status, got) = post_raw(&url, &headers[..2], body).await;
    assert_eq!(status, 401);
    assert_eq!(got["reason"], "missing header webhook-signature");
}

#[test]
fn now_and_tolerance_move_the_window() {
    let secret = Secret::generate();
    let body = b"{}";
    let signed = Signer::new([SigningKey::Hmac(secret.clone())])
        .headers("msg_t", 1_000_000, body)
        .unwrap();
    let mut headers = http::HeaderMap::new();
    for (name, value) in signed.pairs() {
        headers.insert(name, value.parse().unwrap());
    }
    let verifier = WebhookVerifier::standard([secret.into()]).now(1_000_100);
    assert!(verifier.verify(&headers, body.to_vec().into()).is_ok());
    let strict = verifier.clone().tolerance(99);
    assert!(strict.verify(&headers, body.to_vec().into()).is_err());
    let webhook = verifier.verify(&headers, body.to_vec().into()).unwrap();
    assert_eq!(
        (webhook.id.as_deref(), webhook.timestamp),
        (Some("msg_t"), Some(1_000_000))
    );
}
