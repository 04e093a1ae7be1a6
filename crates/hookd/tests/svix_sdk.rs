//! The official Svix Python SDK (PyPI `svix`), code we did not write, drives the real hookd
//! binary end to end: applications, event types, endpoints, headers, secrets, messages and the
//! delivery-log views, including the error types it raises for 404, 409 and 422.

mod support;

use support::{Hookd, python, run_python_script};

const TOKEN: &str = "svix-sdk-admin-token";

fn drive(database_url: &str) {
    let Some(python) = python() else { return };
    let hookd = Hookd::serve(&[
        "--database",
        database_url,
        "--admin-token",
        TOKEN,
        "--allow-http-endpoints",
    ]);
    let output = run_python_script(&python, "svix_sdk_check.py", &[&hookd.base_url, TOKEN]);
    assert!(output.contains("svix SDK check passed"), "{output}");
}

#[test]
fn svix_sdk_drives_hookd_on_sqlite() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    drive(&url);
}

#[tokio::test]
async fn svix_sdk_drives_hookd_on_postgres() {
    let Some((url, _db)) =
        hookd_store::testing::fresh_postgres("svix_sdk_drives_hookd_on_postgres").await
    else {
        return;
    };
    tokio::task::spawn_blocking(move || drive(&url))
        .await
        .expect("the SDK run panicked");
}
