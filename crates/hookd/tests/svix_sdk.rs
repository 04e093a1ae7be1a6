//! The official Svix Python SDK (PyPI `svix`), code we did not write, drives the real hookd
//! binary end to end: applications, event types, endpoints, headers, secrets, messages, the
//! delivery log of real deliveries to a loopback receiver, resend, recover and send-example,
//! expunging a message's payload and an attempt's response, including the error types it
//! raises for 404, 409 and 422; and every field its models read is answered.

mod support;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use support::{Hookd, python, run_python_script};

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

/// Every field the installed Svix SDK's models read is answered (`svix_fields_check.py` reads
/// the models' fields from the package itself), but those the script names as not yet built.
#[tokio::test]
async fn every_field_the_svix_sdk_reads_is_answered() {
    let receiver = Receiver::always(StatusCode::OK).await;
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    tokio::task::spawn_blocking(move || {
        let Some(python) = python() else { return };
        let hookd = Hookd::serve_local(&url, TOKEN, &[]);
        let output = run_python_script(
            &python,
            "svix_fields_check.py",
            &[&hookd.base_url, TOKEN, &receiver.url],
        );
        assert!(output.contains("svix fields check passed"), "{output}");
    })
    .await
    .expect("the fields check panicked");
}
