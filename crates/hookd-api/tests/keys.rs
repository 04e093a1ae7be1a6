//! Endpoint keys through the API: rotation (the Svix shape, the caller's key or a new one,
//! the grace period), `v1a` endpoints that show only their public key, and the database file
//! itself never holding a secret.

mod common;

use common::{TestApi, assert_invalid_field, start_default};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const NEXT: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

async fn endpoint(api: &TestApi, body: Value) -> String {
    let ep = api.endpoint("acme", body).await;
    format!("/app/acme/endpoint/{}", ep["id"].as_str().unwrap())
}

#[tokio::test]
async fn rotation_makes_the_new_secret_current_and_answers_it() {
    let api = start_default().await;
    api.app("Acme", Some("acme")).await;
    let path = endpoint(
        &api,
        json!({"url": "http://127.0.0.1:9/a", "secret": SECRET}),
    )
    .await;
    let (_, secret) = api.call(Method::GET, &format!("{path}/secret"), None).await;
    assert_eq!(secret["key"], SECRET);

    let rotate = format!("{path}/secret/rotate");
    let (status, out) = api
        .call(Method::POST, &rotate, Some(json!({"key": NEXT})))
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["key"], NEXT);
    let (_, secret) = api.call(Method::GET, &format!("{path}/secret"), None).await;
    assert_eq!(secret["key"], NEXT);

    let (status, out) = api
        .call(
            Method::POST,
            &rotate,
            Some(json!({"gracePeriodSeconds": 0})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let generated = out["key"].as_str().unwrap();
    assert!(generated.starts_with("whsec_") && generated != NEXT);

    let (status, body) = api
        .call(
            Method::POST,
            &rotate,
            Some(json!({"gracePeriodSeconds": 700_000})),
        )
        .await;
    assert_invalid_field(status, &body, "gracePeriodSeconds");
    let (status, body) = api
        .call(Method::POST, &rotate, Some(json!({"key": "whsec_short"})))
        .await;
    assert_invalid_field(status, &body, "key");
}

#[tokio::test]
async fn a_v1a_endpoint_shows_only_its_public_key() {
    let api = start_default().await;
    api.app("Acme", Some("acme")).await;
    let ep = api
        .endpoint(
            "acme",
            json!({"url": "http://127.0.0.1:9/a", "signatureSchemes": ["v1a"]}),
        )
        .await;
    assert_eq!(ep["signatureSchemes"], json!(["v1a"]));
    let public = ep["publicKey"].as_str().unwrap().to_owned();
    assert!(public.starts_with("whpk_"), "{public}");
    let path = format!("/app/acme/endpoint/{}", ep["id"].as_str().unwrap());
    let (_, secret) = api.call(Method::GET, &format!("{path}/secret"), None).await;
    assert_eq!(secret, json!({"key": public, "publicKey": public}));

    let (_, rotated) = api
        .call(
            Method::POST,
            &format!("{path}/secret/rotate"),
            Some(json!({})),
        )
        .await;
    let new_public = rotated["key"].as_str().unwrap();
    assert!(new_public.starts_with("whpk_") && new_public != public);
    let (status, body) = api
        .call(
            Method::POST,
            &format!("{path}/secret/rotate"),
            Some(json!({"key": SECRET})),
        )
        .await;
    assert_invalid_field(status, &body, "key");

    let (status, both) = api
        .call(
            Method::PATCH,
            &path,
            Some(json!({"signatureSchemes": ["v1", "v1a"]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{both}");
    assert_eq!(both["signatureSchemes"], json!(["v1", "v1a"]));
    assert_eq!(both["publicKey"], new_public, "the v1a key is kept");
    let (_, secret) = api.call(Method::GET, &format!("{path}/secret"), None).await;
    assert!(secret["key"].as_str().unwrap().starts_with("whsec_"));
    let (status, body) = api
        .call(Method::PATCH, &path, Some(json!({"signatureSchemes": []})))
        .await;
    assert_invalid_field(status, &body, "signatureSchemes");
}

#[tokio::test]
async fn the_database_file_holds_no_secret_in_the_clear() {
    let api = start_default().await;
    api.app("Acme", Some("acme")).await;
    endpoint(
        &api,
        json!({"url": "http://127.0.0.1:9/a", "secret": SECRET}),
    )
    .await;
    let v1a = api
        .endpoint(
            "acme",
            json!({"url": "http://127.0.0.1:9/b", "signatureSchemes": ["v1", "v1a"]}),
        )
        .await;
    let v1a_path = format!("/app/acme/endpoint/{}", v1a["id"].as_str().unwrap());
    let (_, generated) = api
        .call(Method::GET, &format!("{v1a_path}/secret"), None)
        .await;
    let generated = generated["key"].as_str().unwrap().to_owned();

    // Everything SQLite wrote: the database file and its write-ahead log.
    let mut dump = Vec::new();
    for file in ["hookd.db", "hookd.db-wal"] {
        if let Ok(bytes) = std::fs::read(api.dir().join(file)) {
            dump.extend(bytes);
        }
    }
    assert!(dump.len() > 4096, "the files were read");
    let contains = |needle: &str| dump.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(contains("hk1:"), "the keys are there, sealed");
    for secret in [SECRET, generated.as_str()] {
        let body = secret.strip_prefix("whsec_").unwrap();
        assert!(!contains(body), "{secret} is in the database file");
        let raw = webhook_signature::Secret::parse(secret).unwrap();
        let raw = raw.as_bytes();
        assert!(
            !dump.windows(raw.len()).any(|w| w == raw),
            "its raw bytes are"
        );
    }
    assert!(!contains("whsk_") && !contains("whsec_"));
}
