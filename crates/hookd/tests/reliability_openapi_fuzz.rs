//! Promise: bad input never makes hookd fail on its side. schemathesis (PyPI; code we did not
//! write) reads hookd's own OpenAPI document from `/api/v1/openapi.json` and fires generated
//! requests at every operation it describes, valid and invalid (examples, coverage, fuzzing
//! and stateful phases, under a time budget); its `not_a_server_error` check fails on any 5xx.
//!
//! One of each resource is seeded first and its ids handed to schemathesis
//! (`scripts/schemathesis.toml`) so that generated requests reach hookd's logic instead of
//! stopping at a 404. DELETE operations are left out: deleting the seeded application would
//! turn the rest of the run into 404s.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use support::{Api, Hookd, python};

const TOKEN: &str = "openapi-fuzz-admin-token";

/// Seconds schemathesis may spend; `HOOKD_FUZZ_SECONDS` overrides it for a longer hunt.
fn budget() -> String {
    std::env::var("HOOKD_FUZZ_SECONDS").unwrap_or_else(|_| "40".to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_in_the_api() {
    let Some(python) = python() else { return };
    let st = Path::new(&python).with_file_name("st");
    if !st.exists() {
        panic!(
            "{} not found: install scripts/python-requirements.txt into the venv",
            st.display()
        );
    }
    let (database, dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local_with_env(
        &database,
        TOKEN,
        &["--retry-schedule", "0"],
        &[("HOOKD_LOG", "error")],
    );
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint("http://127.0.0.1:9/hook").await;
    let endpoint = api.get(&format!("/app/{app}/endpoint")).await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, message) = api
        .post(
            &format!("/app/{app}/msg"),
            json!({"eventType": "a.b", "payload": {"x": 1}}),
        )
        .await
        .unwrap();
    let msg = message["id"].as_str().unwrap().to_owned();
    let attempt = loop {
        let attempts = api.get(&format!("/app/{app}/attempt/msg/{msg}")).await;
        if let Some(id) = attempts["data"][0]["id"].as_str() {
            break id.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/schemathesis.toml"
    );
    let schema = format!("{}/api/v1/openapi.json", hookd.base_url);
    let budget = budget();
    // schemathesis keeps a cache in its working directory: the test's temporary one.
    let workdir = dir.path().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(st)
            .current_dir(workdir)
            .args(["--config-file", config, "run", &schema])
            .args([
                "--checks",
                "not_a_server_error",
                "--exclude-method",
                "DELETE",
            ])
            // One worker: schemathesis's workers are threads, and CPython 3.11 before 3.11.8
            // shares one AST recursion counter between threads (gh-106905, fixed by
            // python/cpython#113035), so two workers parsing at once crash the tool with
            // "AST constructor recursion depth mismatch" and fail this test for no fault of ours.
            .args(["--max-time", &budget, "--workers", "1", "--no-color"])
            .env("HOOKD_FUZZ_TOKEN", TOKEN)
            .env("HOOKD_FUZZ_APP", &app)
            .env("HOOKD_FUZZ_ENDPOINT", &endpoint)
            .env("HOOKD_FUZZ_MSG", &msg)
            .env("HOOKD_FUZZ_ATTEMPT", &attempt)
            .output()
            .expect("run schemathesis")
    })
    .await
    .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis found failures or errors:\n{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        report.contains("passed"),
        "schemathesis ran test cases:\n{report}"
    );
}
