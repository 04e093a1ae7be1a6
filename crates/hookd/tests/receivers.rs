//! The example receivers, each run against real deliveries from a real `hookd serve`: the Rust
//! one (`crates/hookd-receiver/examples/receiver.rs`, on SQLite), the Python one with the
//! official `standardwebhooks` package (on SQLite) and the Node one with the official npm
//! `standardwebhooks` package (on PostgreSQL), as docs/receiving.md shows them.
//!
//! Each gets seed 001's scenario, in the Standard Webhooks envelope hookd builds (the
//! application's `envelope: true`): consignment C-4471 is `loaded` (version 2); `delivered`
//! (version 4) arrives before the delayed `in transit` (version 3); then each is delivered again
//! (a resend: same `webhook-id`); last, a test send of a realistic `lost` (version 9), marked as
//! a test inside its signed body. Every delivery is acknowledged (2xx in hookd's log); the
//! record ends at delivered, version 4; duplicates never reach the worker, and the test send
//! changes nothing.

mod support;

use std::process::Command;

use hookd_receiver::{
    Inbox, InboxOptions, PgDb, SqliteDb, SqliteInbox, SqliteVersions, VersionStore,
};
use serde_json::{Value, json};
use support::process::{Announced, example_dir, node};
use support::{Api, Hookd, eventually, python, wait_until};
use webhook_signature::Secret;

#[allow(dead_code)] // Its `main` is for people running the example, not for this test.
#[path = "../../hookd-receiver/examples/receiver.rs"]
mod rust_example;

const TOKEN: &str = "receivers-test-admin-token";

/// Runs the scenario through hookd against the receiver at `url`, which verifies with
/// `secret`; returns the message ids in publishing order, the test send's last.
async fn deliver_seed_scenario(url: &str, secret: &str) -> Vec<String> {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(&database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let app = json!({"name": "seed-001", "envelope": true});
    let (_, app) = api.post("/app", app).await.unwrap();
    let app = app["id"].as_str().unwrap().to_owned();
    let (status, endpoint) = api
        .post(
            &format!("/app/{app}/endpoint"),
            json!({"url": url, "secret": secret}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{endpoint}");
    let endpoint = endpoint["id"].as_str().unwrap().to_owned();

    let mut ids = Vec::new();
    for (status, version) in [("loaded", 2), ("delivered", 4), ("in transit", 3)] {
        let payload = json!({"consignment": "C-4471", "status": status, "version": version});
        let id = api.publish(&app, "consignment.updated", payload).await;
        // Each waits for the previous: v4 really arrives before v3.
        acknowledged(&api, &app, &id, 1).await;
        ids.push(id);
    }
    for id in &ids[1..] {
        let (code, _) = api
            .post(
                &format!("/app/{app}/msg/{id}/endpoint/{endpoint}/resend"),
                json!({}),
            )
            .await
            .unwrap();
        assert_eq!(code, 202);
        acknowledged(&api, &app, id, 2).await;
    }
    let lost = json!({"consignment": "C-4471", "status": "lost", "version": 9});
    let example = json!({"eventType": "consignment.updated", "payload": lost});
    let path = format!("/app/{app}/endpoint/{endpoint}/send-example");
    let (code, sent) = api.post(&path, example).await.unwrap();
    assert_eq!(code, 200, "{sent}");
    let test = sent["id"].as_str().unwrap().to_owned();
    acknowledged(&api, &app, &test, 1).await;
    ids.push(test);
    ids
}

/// Waits until message `id` has `count` attempts, and asserts each was answered 2xx.
async fn acknowledged(api: &Api, app: &str, id: &str, count: usize) {
    let attempts = wait_until(api, &format!("/app/{app}/attempt/msg/{id}"), |a| {
        a["data"].as_array().is_some_and(|d| d.len() == count)
    })
    .await;
    for attempt in attempts["data"].as_array().unwrap() {
        let code = attempt["responseStatusCode"].as_i64().unwrap();
        assert!((200..300).contains(&code), "not acknowledged: {attempt}");
    }
}

/// Waits until the receiver's inbox is worked off, then checks the consignment's record.
async fn assert_ends_delivered(inbox: impl Inbox, consignments: impl VersionStore) {
    eventually(async || match inbox.backlog().await.unwrap() {
        0 => Ok(()),
        n => Err(format!("{n} webhooks never processed")),
    })
    .await;
    let (version, state) = consignments
        .get("C-4471")
        .await
        .unwrap()
        .expect("C-4471 stored");
    let state: Value = serde_json::from_str(&state).unwrap();
    assert_eq!((version, state), (4, json!({"status": "delivered"})));
}

/// Each id reached the worker exactly once, only `delivered` changed the record after
/// `loaded` did, and the test send was seen as one.
fn assert_worker_log(output: &str, ids: &[String]) {
    let expected = [("2", "applied"), ("4", "applied"), ("3", "stale, skipped")];
    for (id, (version, outcome)) in ids.iter().zip(expected) {
        let line = format!("{id}: version {version} {outcome}");
        assert_eq!(
            output.matches(&line).count(),
            1,
            "{line:?} once in:\n{output}"
        );
    }
    let test = format!("{}: a test send, nothing applied", ids[3]);
    assert_eq!(
        output.matches(&test).count(),
        1,
        "{test:?} once in:\n{output}"
    );
    assert_eq!(
        output.lines().filter(|l| l.starts_with("msg_")).count(),
        4,
        "{output}"
    );
}

#[tokio::test]
async fn the_rust_example_receiver_ends_at_delivered_version_4() {
    let secret = Secret::generate().to_string();
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("receiver.db");
    let (router, worker) = rust_example::start(&secret, database.to_str().unwrap())
        .await
        .unwrap();
    let worker = tokio::spawn(worker);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/webhooks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    deliver_seed_scenario(&url, &secret).await;
    let (inbox, consignments) = sqlite_tables(&database).await;
    assert_ends_delivered(inbox, consignments).await;
    worker.abort();
}

/// Starts an example receiver (`command`, verifying with `secret`), runs the scenario through
/// hookd, then checks its tables (opened by `tables`) and its worker's log.
async fn example_scenario<I: Inbox, V: VersionStore>(
    command: Command,
    secret: &str,
    tables: impl AsyncFnOnce() -> (I, V),
) {
    let receiver = Announced::start(command);
    let ids = deliver_seed_scenario(&receiver.url, secret).await;
    let (inbox, consignments) = tables().await;
    assert_ends_delivered(inbox, consignments).await;
    assert_worker_log(&receiver.output(), &ids);
}

async fn sqlite_tables(path: &std::path::Path) -> (SqliteInbox, SqliteVersions) {
    let db = SqliteDb::open(path).unwrap();
    let inbox = db
        .inbox("webhook_inbox", InboxOptions::default())
        .await
        .unwrap();
    (inbox, db.versions("consignments").await.unwrap())
}

/// An example receiver's command: `program` running `examples/receivers/<language>/<file>`,
/// verifying with `secret`, on a free port, with its database in the environment variable
/// `database.0`.
fn example_receiver(
    program: &str,
    (language, file): (&str, &str),
    secret: &str,
    database: (&str, &std::ffi::OsStr),
) -> Command {
    let mut command = Command::new(program);
    command
        .arg(example_dir(language).join(file))
        .env("WEBHOOK_SECRET", secret)
        .env(database.0, database.1)
        .env("RECEIVER_PORT", "0");
    command
}

fn python_receiver(python: &str, secret: &str, database: &std::path::Path) -> Command {
    let database = ("RECEIVER_DATABASE", database.as_os_str());
    example_receiver(python, ("python", "receiver.py"), secret, database)
}

fn node_receiver(node: &str, secret: &str, database: &str) -> Command {
    let database = ("DATABASE_URL", std::ffi::OsStr::new(database));
    example_receiver(node, ("node", "receiver.mjs"), secret, database)
}

#[tokio::test]
async fn the_python_receiver_ends_at_delivered_version_4() {
    let Some(python) = python() else { return };
    let secret = Secret::generate().to_string();
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("receiver.db");
    let command = python_receiver(&python, &secret, &database);
    example_scenario(command, &secret, async || sqlite_tables(&database).await).await;
}

#[tokio::test]
async fn the_node_receiver_ends_at_delivered_version_4() {
    let Some(node) = node() else { return };
    let Some((database, _guard)) =
        hookd_store::testing::fresh_postgres("the_node_receiver_ends_at_delivered_version_4").await
    else {
        return;
    };
    let secret = Secret::generate().to_string();
    let command = node_receiver(node, &secret, &database);
    example_scenario(command, &secret, async || {
        let db = PgDb::connect(&database).await.unwrap();
        let inbox = db
            .inbox("webhook_inbox", InboxOptions::default())
            .await
            .unwrap();
        (inbox, db.versions("consignments").await.unwrap())
    })
    .await;
}

#[tokio::test]
async fn the_example_receivers_refuse_a_forged_delivery_with_401() {
    let secret = Secret::generate().to_string();
    let forged = Secret::generate();
    let body = br#"{"consignment":"C-4471","status":"delivered","version":9}"#;
    let headers = webhook_signature::Signer::new([forged.into()])
        .headers("msg_forged", webhook_signature::clock::unix_now(), body)
        .unwrap();
    let post = async |url: &str| {
        let mut request = reqwest::Client::new().post(url).body(body.to_vec());
        for (name, value) in headers.pairs() {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        (
            response.status().as_u16(),
            response.json::<Value>().await.unwrap_or(Value::Null),
        )
    };

    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("rust.db");
    let (router, _worker) = rust_example::start(&secret, database.to_str().unwrap())
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/webhooks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let (status, answer) = post(&url).await;
    assert_eq!(
        (status, answer["error"].clone()),
        (401, json!("unverified")),
        "rust: {answer}"
    );

    if let Some(python) = python() {
        let database = dir.path().join("python.db");
        let receiver = Announced::start(python_receiver(&python, &secret, &database));
        let (status, answer) = post(&receiver.url).await;
        assert_eq!(
            (status, answer["error"].clone()),
            (401, json!("unverified")),
            "python: {answer}"
        );
    }
    if let Some(node) = node() {
        let test = "the_example_receivers_refuse_a_forged_delivery_with_401";
        if let Some((database, _guard)) = hookd_store::testing::fresh_postgres(test).await {
            let receiver = Announced::start(node_receiver(node, &secret, &database));
            let (status, answer) = post(&receiver.url).await;
            assert_eq!(
                (status, answer["error"].clone()),
                (401, json!("unverified")),
                "node: {answer}"
            );
        }
    }
    let (inbox, _) = sqlite_tables(&database).await;
    assert_eq!(
        inbox.record("msg_forged", b"").await.unwrap(),
        hookd_receiver::Seen::New,
        "never recorded"
    );
}

/// The code docs/receiving.md shows is the code these tests run: each ```rust, ```python and
/// ```js block appears verbatim in its example file.
#[test]
fn the_receiving_page_shows_the_tested_code() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap();
    let page = read("docs/receiving.md");
    let sources = [
        ("```rust\n", "crates/hookd-receiver/examples/receiver.rs"),
        ("```python\n", "examples/receivers/python/receiver.py"),
        ("```js\n", "examples/receivers/node/receiver.mjs"),
    ];
    for (fence, path) in sources {
        let source = read(path);
        let blocks: Vec<&str> = page
            .split(fence)
            .skip(1)
            .map(|rest| rest.split("\n```").next().unwrap())
            .collect();
        assert!(
            !blocks.is_empty(),
            "no {fence:?} block in docs/receiving.md"
        );
        for block in blocks {
            assert!(
                source.contains(block),
                "docs/receiving.md shows code not in {path}:\n{block}"
            );
        }
    }
}
