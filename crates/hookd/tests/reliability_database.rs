//! Promise: when the database cannot take a write, the API answers 503 and never 202 for what
//! it did not store; when the database is back, hookd recovers by itself (no restart) and
//! delivers everything it accepted.
//!
//! PostgreSQL is made unavailable for real: the test database stops accepting connections
//! (`ALTER DATABASE … ALLOW_CONNECTIONS false`) and hookd's connections are terminated. SQLite
//! gets a real full disk: its file lives on a tmpfs of a few MiB that the test fills; mounting
//! needs root (CAP_SYS_ADMIN), so without it that test says it is skipped.

mod support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use serde_json::json;
use support::{Api, Hookd};

const TOKEN: &str = "database-test-admin-token";

/// Publishes one message with a payload of about `padding` bytes: the status, and the id when
/// accepted. A status other than 202 or 503 fails the test: the database being away is never a
/// 500, and never a hang (the request is bounded by the client's wait).
async fn publish(api: &Api, app: &str, padding: usize) -> (u16, Option<String>) {
    let body = json!({"eventType": "a.b", "payload": {"pad": "x".repeat(padding)}});
    let (status, out) = tokio::time::timeout(
        Duration::from_secs(30),
        api.post(&format!("/app/{app}/msg"), body),
    )
    .await
    .expect("the API answers while the database is away")
    .expect("the API answers");
    assert!(
        status == 202 || status == 503,
        "publish answered {status}: {out}"
    );
    if status == 503 {
        assert_eq!(out["code"], "unavailable", "{out}");
    }
    (status, out["id"].as_str().map(str::to_owned))
}

/// Publishes (bounded) until a 202 comes back: hookd recovered on its own.
async fn publish_until_accepted(api: &Api, app: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let (202, Some(id)) = publish(api, app, 10).await {
            return id;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "hookd did not recover after the database came back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits (bounded) until every id in `accepted` reached `receiver`.
async fn wait_delivered(receiver: &Receiver, accepted: &HashSet<String>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let received: HashSet<String> = receiver
            .requests()
            .iter()
            .map(|r| r.header("webhook-id").to_owned())
            .collect();
        let missing = accepted.difference(&received).count();
        if missing == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{missing} accepted messages never arrived"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs SQL on the test server as its administrative user; answers what it printed.
fn psql(server_url: &str, sql: &str) -> String {
    let output = Command::new("psql")
        .args([server_url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql])
        .output()
        .expect("run psql");
    assert!(
        output.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Refuses new connections to database `name` and ends every open one, until none is left: a
/// connection hookd was opening while the first terminations ran is ended by a later round.
fn take_database_away(server_url: &str, name: &str) {
    psql(
        server_url,
        &format!(r#"ALTER DATABASE "{name}" ALLOW_CONNECTIONS false;"#),
    );
    for _ in 0..100 {
        let left = psql(
            server_url,
            &format!(
                "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity \
                 WHERE datname = '{name}';"
            ),
        );
        if left == "0" {
            return;
        }
    }
    panic!("connections to {name} keep coming back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_unavailable_answers_503_and_hookd_recovers_by_itself() {
    let test = "postgres_unavailable_answers_503_and_hookd_recovers_by_itself";
    let Some((database, guard)) = hookd_store::testing::fresh_postgres(test).await else {
        return;
    };
    let server = std::env::var("HOOKD_TEST_POSTGRES_URL").unwrap();
    let name = guard.name().to_owned();
    let receiver = Receiver::always(StatusCode::OK).await;
    let hookd = Hookd::serve_local_with_env(&database, TOKEN, &[], &[("HOOKD_LOG", "error")]);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&receiver.url).await;
    let mut accepted = HashSet::new();
    accepted.insert(publish_until_accepted(&api, &app).await);

    take_database_away(&server, &name);
    let publishes: Vec<_> = (0..4)
        .map(|_| {
            let (api, app) = (api.clone(), app.clone());
            tokio::spawn(async move { publish(&api, &app, 10).await })
        })
        .collect();
    let mut answers = Vec::new();
    for publish in publishes {
        answers.push(publish.await.unwrap());
    }
    assert!(
        answers.iter().all(|(status, _)| *status == 503),
        "every publish while the database is away is a 503: {answers:?}"
    );
    let health = reqwest::get(format!("{}/api/v1/health", hookd.base_url))
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 503);

    psql(
        &server,
        &format!(r#"ALTER DATABASE "{name}" ALLOW_CONNECTIONS true;"#),
    );
    accepted.insert(publish_until_accepted(&api, &app).await);
    for _ in 0..5 {
        accepted.insert(publish_until_accepted(&api, &app).await);
    }
    wait_delivered(&receiver, &accepted).await;
    drop(hookd);
    guard.drop_database().await.unwrap();
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// `None` (after saying so) when this process may not mount (not root).
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .is_ok_and(|out| out.status.success());
        if !mounted {
            println!("SKIPPED: cannot mount a size-limited tmpfs (needs root or CAP_SYS_ADMIN)");
            return None;
        }
        Some(Self { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a filler file until the disk is full; returns its path.
    fn fill(&self) -> PathBuf {
        use std::io::Write as _;
        let path = self.path().join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        let small = [0u8; 512];
        while file.write_all(&small).is_ok() {}
        let _ = file.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_503_and_hookd_recovers_when_space_returns_on_sqlite() {
    let Some(disk) = SmallDisk::mount("8m") else {
        return;
    };
    let database = format!("sqlite://{}", disk.path().join("hookd.db").display());
    let receiver = Receiver::always(StatusCode::OK).await;
    let hookd = Hookd::serve_local_with_env(&database, TOKEN, &[], &[("HOOKD_LOG", "error")]);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&receiver.url).await;
    let mut accepted = HashSet::new();
    accepted.insert(publish_until_accepted(&api, &app).await);

    let filler = disk.fill();
    // SQLite may still fit a few writes in pages it already owns; publish until it cannot.
    let mut refused = 0;
    for _ in 0..200 {
        match publish(&api, &app, 50_000).await {
            (202, Some(id)) => {
                accepted.insert(id);
            }
            _ => refused += 1,
        }
        if refused >= 3 {
            break;
        }
    }
    assert!(refused >= 3, "a full disk refuses writes with 503");

    std::fs::remove_file(filler).unwrap();
    accepted.insert(publish_until_accepted(&api, &app).await);
    for _ in 0..5 {
        accepted.insert(publish_until_accepted(&api, &app).await);
    }
    for id in &accepted {
        api.get(&format!("/app/{app}/msg/{id}")).await;
    }
    wait_delivered(&receiver, &accepted).await;
    drop(hookd);
}
