//! `hookd listen` as a child process receiving real deliveries from a real `hookd serve`: it
//! prints each one (headers, indented body, verified or not and why) and answers the status it
//! was given (401 to one that does not verify), which hookd's delivery log then shows. Its
//! scenarios (`--fail`, `--delay`, `--retry-after`, `--location`) are exercised against hookd
//! in `seed_experiments.rs`.

mod support;

use std::process::Command;

use serde_json::json;
use support::process::Announced;
use support::{Api, Hookd, wait_until};
use webhook_signature::Secret;

const TOKEN: &str = "listen-test-admin-token";

fn listen(args: &[&str]) -> Announced {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hookd"));
    command.args(["listen", "--port", "0"]).args(args);
    Announced::start(command)
}

#[tokio::test]
async fn listen_answers_the_chosen_status_when_verified_and_401_when_not() {
    let secret = Secret::generate().to_string();
    let listener = listen(&["--secret", &secret, "--status", "202"]);
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(&database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let (_, app) = api.post("/app", json!({"name": "listen"})).await.unwrap();
    let app = app["id"].as_str().unwrap().to_owned();
    let other_secret = Secret::generate().to_string();
    for (path, key) in [("/right", &secret), ("/wrong", &other_secret)] {
        let endpoint = json!({"url": format!("{}{path}", listener.url), "secret": key});
        let (status, body) = api
            .post(&format!("/app/{app}/endpoint"), endpoint)
            .await
            .unwrap();
        assert_eq!(status, 201, "{body}");
    }

    // Sent as text: keys out of alphabetical order, which the listener must keep.
    let message = r#"{"eventType":"order.shipped","payload":{"orderId":1003,"items":[{"sku":"A-1"}],"note":"é"}}"#;
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/app/{app}/msg", hookd.base_url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(message)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 202);
    let message: serde_json::Value = response.json().await.unwrap();
    let msg_id = message["id"].as_str().unwrap();

    listener.wait_for_output("answered: 202", 1).await;
    let output = listener.wait_for_output("answered: 401", 1).await;
    let reports: Vec<&str> = output.split("━━ #").skip(1).collect();
    let report = |path: &str| {
        reports
            .iter()
            .find(|r| r.contains(&format!("POST {path} ")))
            .unwrap_or_else(|| panic!("no report for {path}:\n{output}"))
    };
    let right = report("/right");
    assert!(
        right.contains(&format!("webhook-id: {msg_id}\n")),
        "{right}"
    );
    assert!(right.contains("webhook-signature: v1,"), "{right}");
    assert!(
        right.contains("{\n  \"orderId\": 1003,\n  \"items\": [\n    {\n      \"sku\": \"A-1\"\n    }\n  ],\n  \"note\": \"é\"\n}"),
        "the body indented, in the order sent:\n{right}"
    );
    assert!(right.contains("verified: yes\n"), "{right}");
    let wrong = report("/wrong");
    assert!(
        wrong.contains("verified: NO: no matching signature\n"),
        "{wrong}"
    );

    let attempts = wait_until(&api, &format!("/app/{app}/attempt/msg/{msg_id}"), |a| {
        a["data"].as_array().is_some_and(|d| d.len() == 2)
    })
    .await;
    let mut codes: Vec<i64> = attempts["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|attempt| attempt["responseStatusCode"].as_i64().unwrap())
        .collect();
    codes.sort();
    assert_eq!(
        codes,
        [202, 401],
        "the forged delivery is refused: {attempts}"
    );
}

#[tokio::test]
async fn listen_without_a_secret_says_it_did_not_check_and_can_answer_failures() {
    let listener = listen(&["--status", "503"]);
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(&database, TOKEN, &["--retry-schedule", "0"]);
    let api = Api::new(&hookd, TOKEN);
    let app = api
        .app_with_endpoint(&format!("{}/hook", listener.url))
        .await;
    let msg_id = api.publish(&app, "a.b", json!({})).await;
    let output = listener.wait_for_output("answered: 503", 1).await;
    assert!(
        output.contains("verified: not checked (no --secret)"),
        "{output}"
    );
    let attempts = wait_until(&api, &format!("/app/{app}/attempt/msg/{msg_id}"), |a| {
        a["data"].as_array().is_some_and(|d| !d.is_empty())
    })
    .await;
    assert_eq!(attempts["data"][0]["responseStatusCode"], 503);
}

#[test]
fn listen_refuses_an_unreadable_secret_with_exit_code_2() {
    let output = Command::new(env!("CARGO_BIN_EXE_hookd"))
        .args(["listen", "--port", "0", "--secret", "whsec_!!!"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--secret"), "{stderr}");
}

#[tokio::test]
async fn listen_checks_github_and_stripe_signatures_with_scheme() {
    let body = br#"{"action":"opened"}"#;
    let now = webhook_signature::clock::unix_now();
    let cases = [
        (
            "github",
            webhook_signature::github::HEADER,
            webhook_signature::github::sign("dev-secret", body),
        ),
        (
            "stripe",
            webhook_signature::stripe::HEADER,
            webhook_signature::stripe::sign("dev-secret", now, body),
        ),
    ];
    for (scheme, header, signature) in cases {
        let listener = listen(&["--scheme", scheme, "--secret", "dev-secret"]);
        // Signed as is, then the same signature on a changed body.
        for (sent, answer) in [(&body[..], 200), (br#"{"action":"closed"}"#, 401)] {
            let response = reqwest::Client::new()
                .post(format!("{}/{scheme}", listener.url))
                .header(header, &signature)
                .body(sent.to_vec())
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), answer, "{scheme}");
        }
        let output = listener.wait_for_output("answered: 401", 1).await;
        assert_eq!(
            output.matches("verified: yes\n").count(),
            1,
            "{scheme}: {output}"
        );
        assert_eq!(
            output
                .matches("verified: NO: no matching signature\n")
                .count(),
            1,
            "{scheme}: {output}"
        );
    }
}
