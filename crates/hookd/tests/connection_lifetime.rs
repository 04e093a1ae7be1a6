//! Promise: pooled connections to an endpoint live at most `--connection-lifetime`, so a
//! receiver whose name moves to a new address gets deliveries there within it.
//!
//! The binary resolves `receiver.test` from a hosts file (`HOOKD_TEST_HOSTS_FILE`, read on
//! every lookup): first to a receiver on 127.0.0.1, then to one on 127.0.0.2 at the same port.
//! hookd's clock is moved past the lifetime rather than waited for.

mod support;

use std::net::SocketAddr;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use serde_json::json;
use support::{Api, Hookd, TestTime};

const TOKEN: &str = "connection-lifetime-test-admin-token";

/// Points `receiver.test` at `address` in the hosts file at `path` (write, then rename).
fn point_name_at(path: &std::path::Path, address: &str) {
    let staging = path.with_extension("new");
    std::fs::write(&staging, format!("receiver.test {address}\n")).unwrap();
    std::fs::rename(&staging, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_follow_a_moved_name_once_connections_reach_their_lifetime() {
    let old = Receiver::always(StatusCode::OK).await;
    // Its url is http://127.0.0.1:<port>/hook.
    let port: u16 = old
        .url
        .trim_end_matches("/hook")
        .rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .unwrap();
    let new_address = SocketAddr::new("127.0.0.2".parse().unwrap(), port);
    let new = Receiver::start_at(new_address, |_| async { StatusCode::OK }).await;
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    point_name_at(&hosts, "127.0.0.1");
    let time = TestTime::start();
    let database = format!("sqlite://{}", dir.path().join("hookd.db").display());
    let hookd = Hookd::serve_local_with_env(
        &database,
        TOKEN,
        &["--connection-lifetime", "2m"],
        &[
            ("HOOKD_TEST_CLOCK_OFFSET_FILE", time.offset_file()),
            ("HOOKD_TEST_HOSTS_FILE", hosts.to_str().unwrap()),
        ],
    );
    let api = Api::new(&hookd, TOKEN);
    let app = api
        .app_with_endpoint(&format!("http://receiver.test:{port}/hook"))
        .await;

    api.publish(&app, "order.shipped", json!({"n": 1})).await;
    old.wait_for(1).await;

    // The name moves; hookd's clock passes the lifetime of the connection it pooled.
    point_name_at(&hosts, "127.0.0.2");
    time.set(3 * 60 * 1000);
    api.publish(&app, "order.shipped", json!({"n": 2})).await;
    new.wait_for(1).await;

    assert_eq!(old.count(), 1, "the old address got only the first");
    let body: serde_json::Value = serde_json::from_slice(&new.requests()[0].body).unwrap();
    assert_eq!(body, json!({"n": 2}));
}
