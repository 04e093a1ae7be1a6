//! The official Svix Python SDK (PyPI `svix`), code we did not write, drives the real hookd
//! binary end to end: applications, event types, endpoints, headers, secrets, messages, the
//! delivery log of real deliveries to a loopback receiver, resend, recover and send-example,
//! expunging a message's payload and an attempt's response, including the error types it
//! raises for 404, 409 and 422; and every field its models, and the official JavaScript SDK's,
//! read is answered.

mod support;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use support::{Hookd, process, python, run_python_script};

const TOKEN: &str = "svix-sdk-admin-token";

fn drive(database_url: &str, receiver_url: &str) {
    let Some(python) = python() else { return };
    let hookd = Hookd::serve_local(database_url, TOKEN, &[]);
    let output = run_python_script(
        &python,
        "svix_sdk_check.py",
        &[&hookd.base_url, TOKEN, receiver_url],
    );
    assert!(output.contains("svix SDK check passed"), "{output}");
}

#[tokio::test]
async fn svix_sdk_drives_hookd_on_sqlite() {
    let receiver = Receiver::always(StatusCode::OK).await;
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    tokio::task::spawn_blocking(move || drive(&url, &receiver.url))
        .await
        .expect("the SDK run panicked");
}

#[tokio::test]
async fn svix_sdk_drives_hookd_on_postgres() {
    let Some((url, _db)) =
        hookd_store::testing::fresh_postgres("svix_sdk_drives_hookd_on_postgres").await
    else {
        return;
    };
    let receiver = Receiver::always(StatusCode::OK).await;
    tokio::task::spawn_blocking(move || drive(&url, &receiver.url))
        .await
        .expect("the SDK run panicked");
}

/// Every field the installed Svix SDKs' models read is answered (`svix_fields_check.py` reads
/// the models' fields from the packages themselves): the Python SDK's, and the JavaScript
/// SDK's (npm `svix`, pinned in `scripts/crosscheck/svix-js`) unless Node and npm are missing
/// (then that half says it is skipped; CI requires them).
#[tokio::test]
async fn every_field_the_svix_sdks_read_is_answered() {
    let receiver = Receiver::always(StatusCode::OK).await;
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    tokio::task::spawn_blocking(move || {
        let Some(python) = python() else { return };
        let javascript = process::svix_js_package();
        if javascript.is_none() {
            println!("SKIPPED: the JavaScript SDK's models are not checked");
        }
        let passed = match javascript {
            Some(_) => "svix fields check passed: python, javascript",
            None => "svix fields check passed: python",
        };
        let hookd = Hookd::serve_local(&url, TOKEN, &[]);
        let mut args = vec![hookd.base_url.clone(), TOKEN.into(), receiver.url.clone()];
        args.extend(javascript.map(|dir| dir.to_str().expect("a UTF-8 path").to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = run_python_script(&python, "svix_fields_check.py", &args);
        assert!(output.contains(passed), "{output}");
    })
    .await
    .expect("the fields check panicked");
}
