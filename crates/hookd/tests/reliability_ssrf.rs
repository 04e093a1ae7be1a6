//! Promise: with its default SSRF guard, hookd delivers to no address that is not globally
//! routable, however the address is spelled. A real receiver listens on 127.0.0.1; endpoints
//! point at it (and at private, link-local and metadata addresses) in every spelling; one
//! message fans out to all of them; every attempt is refused with an error that names the
//! address and its range, and the receiver never hears a byte.
//!
//! Names that resolve to forbidden ranges, and a name that changes its answer between lookups,
//! are proven against the real sender with scripted DNS answers in
//! `crates/hookd-engine/tests/http_sender.rs` (the binary uses the system resolver, which a
//! test cannot script without root); here `localhost` stands for them.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use serde_json::json;
use support::{Api, Hookd};

const TOKEN: &str = "ssrf-test-admin-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_forbidden_address_form_is_refused_with_a_clear_attempt_error() {
    refuses_every_forbidden_address(&[]).await;
}

/// Through an egress proxy, which would connect anywhere: IP literals and names alike are
/// refused before the proxy gets a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_an_egress_proxy_every_forbidden_address_form_is_refused_too() {
    let proxy = Receiver::always(StatusCode::OK).await;
    let proxy_url = proxy.url.trim_end_matches("/hook").to_owned();
    refuses_every_forbidden_address(&["--egress-proxy", &proxy_url]).await;
    assert_eq!(proxy.count(), 0, "nothing reached the proxy");
}

async fn refuses_every_forbidden_address(extra: &[&str]) {
    let receiver = Receiver::always(StatusCode::OK).await;
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let args = [
        &[
            "--database",
            database.as_str(),
            "--admin-token",
            TOKEN,
            "--allow-http-endpoints",
            "--retry-schedule",
            "0",
        ],
        extra,
    ]
    .concat();
    let hookd = Hookd::serve_with_env(&args, &[("HOOKD_LOG", "error")]);
    let api = Api::new(&hookd, TOKEN);
    let (_, app) = api.post("/app", json!({"name": "ssrf"})).await.unwrap();
    let app = app["id"].as_str().unwrap().to_owned();

    // (host as written in the URL, what the refusal must name)
    let table = [
        ("127.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),         // decimal
        ("017700000001", "127.0.0.1"),       // octal
        ("0177.0.0.1", "127.0.0.1"),         // octal dotted
        ("0x7f000001", "127.0.0.1"),         // hex
        ("0x7f.0.0.1", "127.0.0.1"),         // hex dotted
        ("[::ffff:127.0.0.1]", "127.0.0.1"), // IPv4-mapped
        ("[::ffff:7f00:1]", "127.0.0.1"),    // IPv4-mapped, hex
        ("[::127.0.0.1]", "127.0.0.1"),      // IPv4-compatible (deprecated)
        ("[64:ff9b::7f00:1]", "127.0.0.1"),  // NAT64
        ("[::1]", "::1"),
        ("0", "0.0.0.0"),
        ("10.0.0.1", "10.0.0.1"),
        ("172.16.0.1", "172.16.0.1"),
        ("192.168.1.1", "192.168.1.1"),
        ("100.64.0.1", "100.64.0.1"),
        ("169.254.169.254", "169.254.169.254"), // cloud metadata
        ("[fd00::1]", "fd00::1"),
        ("[fe80::1]", "fe80::1"),
        ("localhost", "localhost"), // a name resolving to loopback
    ];
    let mut endpoints = HashMap::new();
    for (host, named) in table {
        let id = api
            .endpoint(&app, &format!("http://{host}:{port}/hook"))
            .await;
        endpoints.insert(id, (host, named));
    }

    let (status, _) = api
        .post(
            &format!("/app/{app}/msg"),
            json!({"eventType": "a.b", "payload": {}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 202);

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for (endpoint, (host, named)) in &endpoints {
        let path = format!("/app/{app}/attempt/endpoint/{endpoint}");
        let attempt = loop {
            let attempts = api.get(&path).await;
            if let Some(attempt) = attempts["data"].as_array().and_then(|d| d.first()) {
                break attempt.clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no attempt for {host}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let error = attempt["response"].as_str().unwrap();
        assert_eq!(attempt["responseStatusCode"], 0, "{host}: {attempt}");
        assert!(
            error.starts_with("refused ")
                && error.contains(named)
                && error.ends_with("allow it with --allow-subnet"),
            "{host}: {error}"
        );
    }
    assert_eq!(receiver.count(), 0, "nothing reached the loopback receiver");
}
