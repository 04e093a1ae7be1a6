//! The product end to end: the real binary accepts messages through its API, its engine
//! delivers them signed to a real receiver, the delivery log shows every attempt, and resend
//! and recover send again with the same `webhook-id`.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use serde_json::json;
use support::{Api, Hookd, wait_until};
use webhook_signature::{Secret, Verifier};

const TOKEN: &str = "delivery-test-admin-token";

fn serve(database: &str, extra: &[&str]) -> Hookd {
    Hookd::serve_local(database, TOKEN, extra)
}

#[tokio::test]
async fn a_published_message_arrives_signed_and_the_log_shows_it() {
    let receiver = Receiver::always(StatusCode::NO_CONTENT).await;
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = serve(&database, &[]);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&receiver.url).await;
    let endpoints = api.get(&format!("/app/{app}/endpoint")).await;
    let endpoint = endpoints["data"][0]["id"].as_str().unwrap().to_owned();
    let secret = api
        .get(&format!("/app/{app}/endpoint/{endpoint}/secret"))
        .await["key"]
        .as_str()
        .unwrap()
        .to_owned();

    let (status, message) = api
        .post(
            &format!("/app/{app}/msg"),
            json!({"eventType": "order.shipped", "payload": {"orderId": 1003}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 202);
    let msg_id = message["id"].as_str().unwrap();
    receiver.wait_for(1).await;
    let request = &receiver.requests()[0];
    assert_eq!(request.header("webhook-id"), msg_id);
    assert_eq!(&request.body[..], br#"{"orderId":1003}"#);
    assert!(request.header("user-agent").starts_with("hookd/"));
    let timestamp: u64 = request.header("webhook-timestamp").parse().unwrap();
    let headers =
        ["webhook-id", "webhook-timestamp", "webhook-signature"].map(|n| (n, request.header(n)));
    Verifier::new(Secret::parse(&secret).unwrap())
        .now(timestamp)
        .verify(&request.body, headers)
        .expect("signed with the endpoint's secret");

    let attempts = wait_until(&api, &format!("/app/{app}/attempt/msg/{msg_id}"), |a| {
        a["data"].as_array().is_some_and(|d| !d.is_empty())
    })
    .await;
    assert_eq!(attempts["data"][0]["responseStatusCode"], 204);
    assert_eq!(attempts["data"][0]["status"], 0);
    let destinations = api.get(&format!("/app/{app}/msg/{msg_id}/endpoint")).await;
    assert_eq!(destinations["data"][0]["statusText"], "success");
}

#[tokio::test]
async fn resend_and_recover_send_again_with_the_same_id() {
    let healthy = Arc::new(AtomicBool::new(false));
    let flag = healthy.clone();
    let receiver = Receiver::start(move |_| {
        let ok = flag.load(Ordering::SeqCst);
        async move {
            if ok {
                StatusCode::OK
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    })
    .await;
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = serve(&database, &["--retry-schedule", "0"]);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&receiver.url).await;
    let endpoint = api.get(&format!("/app/{app}/endpoint")).await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, message) = api
        .post(
            &format!("/app/{app}/msg"),
            json!({"eventType": "a.b", "payload": {}}),
        )
        .await
        .unwrap();
    let msg_id = message["id"].as_str().unwrap().to_owned();
    let destinations = format!("/app/{app}/msg/{msg_id}/endpoint");
    wait_until(&api, &destinations, |d| {
        d["data"][0]["statusText"] == "fail"
    })
    .await;

    healthy.store(true, Ordering::SeqCst);
    let (status, recovered) = api
        .post(
            &format!("/app/{app}/endpoint/{endpoint}/recover"),
            json!({"since": "2000-01-01T00:00:00Z"}),
        )
        .await
        .unwrap();
    assert_eq!((status, recovered["recovered"].clone()), (202, json!(1)));
    wait_until(&api, &destinations, |d| {
        d["data"][0]["statusText"] == "success"
    })
    .await;

    let (status, _) = api
        .post(
            &format!("/app/{app}/msg/{msg_id}/endpoint/{endpoint}/resend"),
            json!({}),
        )
        .await
        .unwrap();
    assert_eq!(status, 202);
    receiver.wait_for(3).await;
    let ids: Vec<_> = receiver
        .requests()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(ids, vec![msg_id.clone(); 3]);
    let attempts = wait_until(&api, &format!("/app/{app}/attempt/msg/{msg_id}"), |a| {
        a["data"].as_array().is_some_and(|d| d.len() == 3)
    })
    .await;
    let triggers: Vec<_> = attempts["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["triggerType"].as_i64().unwrap())
        .collect();
    assert_eq!(
        triggers,
        vec![1, 0, 0],
        "the resend is a manual attempt, newest first"
    );
}

#[tokio::test]
async fn recover_and_resend_of_unknown_things_are_404_and_bad_ranges_422() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = serve(&database, &[]);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint("http://127.0.0.1:9/hook").await;
    let (status, _) = api
        .post(
            &format!("/app/{app}/endpoint/ep_nope/recover"),
            json!({"since": "2000-01-01T00:00:00Z"}),
        )
        .await
        .unwrap();
    assert_eq!(status, 404);
    let (status, body) = api
        .post(
            &format!("/app/{app}/msg/msg_nope/endpoint/ep_nope/resend"),
            json!({}),
        )
        .await
        .unwrap();
    assert_eq!((status, body["code"].clone()), (404, json!("not_found")));
    let endpoint = api.get(&format!("/app/{app}/endpoint")).await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = api
        .post(
            &format!("/app/{app}/endpoint/{endpoint}/recover"),
            json!({"since": "yesterday"}),
        )
        .await
        .unwrap();
    assert_eq!(
        (status, body["detail"][0]["loc"][1].clone()),
        (422, json!("since"))
    );
    let (status, body) = api
        .post(
            &format!("/app/{app}/endpoint/{endpoint}/recover"),
            json!({"since": "2024-01-02T00:00:00Z", "until": "2024-01-01T00:00:00Z"}),
        )
        .await
        .unwrap();
    assert_eq!(
        (status, body["detail"][0]["loc"][1].clone()),
        (422, json!("until"))
    );
}

#[tokio::test]
async fn send_example_delivers_the_catalog_example_to_that_endpoint_alone() {
    let target = Receiver::always(StatusCode::OK).await;
    let bystander = Receiver::always(StatusCode::OK).await;
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = serve(&database, &[]);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&target.url).await;
    let endpoint = api.get(&format!("/app/{app}/endpoint")).await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = api
        .post(
            &format!("/app/{app}/endpoint"),
            json!({"url": bystander.url}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201);
    let schemas = json!({"1": {"type": "object", "examples": [{"orderId": 7}]}});
    let (status, _) = api
        .post(
            "/event-type",
            json!({"name": "order.shipped", "description": "Shipped", "schemas": schemas}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201);

    let path = format!("/app/{app}/endpoint/{endpoint}/send-example");
    let (status, sent) = api
        .post(&path, json!({"eventType": "order.shipped"}))
        .await
        .unwrap();
    assert_eq!(
        (status, sent["payload"].clone()),
        (200, json!({"orderId": 7, "test": true}))
    );
    target.wait_for(1).await;
    assert_eq!(
        &target.requests()[0].body[..],
        br#"{"orderId":7,"test":true}"#,
        "marked as a test inside the signed body"
    );
    let (status, body) = api
        .post(
            &path,
            json!({"eventType": "order.shipped", "exampleIndex": 3}),
        )
        .await
        .unwrap();
    assert_eq!(
        (status, body["detail"][0]["loc"][1].clone()),
        (422, json!("exampleIndex"))
    );
    assert_eq!(
        bystander.count(),
        0,
        "a test send goes to its endpoint alone"
    );
}

#[test]
fn serve_refuses_a_trust_ca_file_it_cannot_use_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("hookd.db").display());
    let not_pem = dir.path().join("key.der");
    std::fs::write(&not_pem, [0x30, 0x82, 0x01]).unwrap();
    for (file, why) in [
        (dir.path().join("no-such-ca.pem"), "No such file"),
        (not_pem, "no PEM certificate in it"),
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_hookd"))
            .args(["serve", "--listen", "127.0.0.1:0", "--database", &database])
            .arg("--trust-ca")
            .arg(&file)
            .env("HOOKD_MASTER_KEY", support::TEST_MASTER_KEY)
            .output()
            .unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        let expected = format!("--trust-ca {}: {why}", file.display());
        assert!(stderr.contains(&expected), "{stderr}");
    }
}
