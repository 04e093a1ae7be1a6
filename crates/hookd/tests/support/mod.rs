//! End-to-end helpers: the real `hookd` binary as a child process, and the Python interpreter
//! that runs code we did not write against it.

#![allow(dead_code)] // Each test binary uses a different part of this module.

pub mod process;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The master key the tests' hookd processes seal endpoint secrets with (in the environment,
/// so a restarted process on the same database opens what the first one sealed).
pub const TEST_MASTER_KEY: &str = "aG9va2QgdGVzdCBtYXN0ZXIga2V5IC0tIDMyIGJ5dGU=";

/// A running `hookd serve`, killed when dropped.
pub struct Hookd {
    /// Where its API listens (empty for `--role engine`, which has none).
    pub base_url: String,
    /// What it printed on stdout before it listened (the first-start admin token, say).
    pub startup: Vec<String>,
    child: Child,
}

impl Hookd {
    /// Starts `hookd serve` on a free loopback port with `args` added, and waits until it
    /// prints the address it listens on (or, with `--role engine`, that it runs).
    pub fn serve(args: &[&str]) -> Self {
        Self::serve_with(args, &[], Stdio::inherit())
    }

    /// [`Hookd::serve`] with environment variables `env` set for the child.
    pub fn serve_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::serve_with(args, env, Stdio::inherit())
    }

    /// [`Hookd::serve`] with environment variables `env` set (after the defaults: the test
    /// master key, warnings-only logging) and its stderr sent to `stderr`.
    pub fn serve_with(args: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hookd"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("HOOKD_LOG", "warn")
            .env("HOOKD_MASTER_KEY", TEST_MASTER_KEY)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start hookd");
        let stdout = child.stdout.take().expect("piped stdout");
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut lines = BufReader::new(stdout).lines();
        let mut startup = Vec::new();
        let base_url = loop {
            assert!(Instant::now() < deadline, "hookd did not start in time");
            let line = lines
                .next()
                .expect("hookd exited before listening")
                .expect("read stdout");
            if let Some(url) = line.strip_prefix("hookd listening on ") {
                break url.to_owned();
            }
            if line == "hookd engine running" {
                break String::new();
            }
            startup.push(line);
        };
        Self {
            base_url,
            startup,
            child,
        }
    }
}

impl Hookd {
    /// `hookd serve` on `database` with admin token `token`, delivering to plain-http
    /// loopback receivers (the SSRF guard opened for 127.0.0.0/8 only), plus `extra` options.
    pub fn serve_local(database: &str, token: &str, extra: &[&str]) -> Self {
        Self::serve_local_with_env(database, token, extra, &[])
    }

    /// [`Hookd::serve_local`] with environment variables `env` set for the child.
    pub fn serve_local_with_env(
        database: &str,
        token: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Self::serve_local_with(database, token, extra, env, Stdio::inherit())
    }

    /// [`Hookd::serve_local_with_env`] with its stderr sent to `stderr`.
    pub fn serve_local_with(
        database: &str,
        token: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        stderr: Stdio,
    ) -> Self {
        let mut args = vec![
            "--database",
            database,
            "--admin-token",
            token,
            "--allow-http-endpoints",
            "--allow-subnet",
            "127.0.0.0/8",
        ];
        args.extend_from_slice(extra);
        Self::serve_with(&args, env, stderr)
    }

    /// The text of its `/metrics` (served without a token unless `--metrics-token` is given).
    pub async fn metrics(&self) -> String {
        let response = reqwest::get(format!("{}/metrics", self.base_url)).await;
        response.unwrap().text().await.unwrap()
    }

    /// The child's process id (for reading its memory from `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child's resident set size in KiB (`VmRSS` in `/proc/<pid>/status`; Linux only).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read /proc/<pid>/status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/<pid>/status")
    }

    /// `kill -9`: the process gets no chance to finish anything.
    pub fn kill_hard(&mut self) {
        self.child.kill().expect("SIGKILL hookd");
        self.child.wait().expect("reap hookd");
    }

    /// Sends SIGTERM (what a service manager sends to stop it).
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Waits for the process to exit, for at most `bound` (a generous bound: exceeding it
    /// means it hangs); returns its exit status.
    pub async fn exited_within(&mut self, bound: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll hookd") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "hookd still running after {bound:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A minimal client of hookd's API for end-to-end tests (the Svix SDK tests use the real SDK).
#[derive(Clone)]
pub struct Api {
    base: String,
    token: String,
    client: reqwest::Client,
}

impl Api {
    pub fn new(hookd: &Hookd, token: &str) -> Self {
        Self {
            base: format!("{}/api/v1", hookd.base_url),
            token: token.into(),
            client: reqwest::Client::new(),
        }
    }

    /// The same client calling paths from the server's root: the ingest API
    /// (`/ingest/api/v1/…`) is served beside `/api/v1`.
    pub fn at_root(&self) -> Self {
        Self {
            base: self.base.trim_end_matches("/api/v1").to_owned(),
            ..self.clone()
        }
    }

    /// The same client calling with `token`.
    pub fn with_token(&self, token: &str) -> Self {
        Self {
            token: token.into(),
            ..self.clone()
        }
    }

    /// `method path` with `body` and the extra `headers`: the status and JSON answer (`null`
    /// without one), whatever the status.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
        headers: &[(&str, &str)],
    ) -> (u16, serde_json::Value) {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (
            status,
            response.json().await.unwrap_or(serde_json::Value::Null),
        )
    }

    /// POSTs `body` to `path`; the status and JSON answer, or the transport error.
    pub async fn post(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> Result<(u16, serde_json::Value), reqwest::Error> {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?;
        let status = response.status().as_u16();
        Ok((
            status,
            response.json().await.unwrap_or(serde_json::Value::Null),
        ))
    }

    /// GETs `path` and returns the JSON answer, asserting a 200.
    pub async fn get(&self, path: &str) -> serde_json::Value {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "GET {path}");
        response.json().await.unwrap()
    }

    /// Publishes `payload` as an `event_type` message to `app`, asserting a 202; returns the
    /// message id.
    pub async fn publish(&self, app: &str, event_type: &str, payload: serde_json::Value) -> String {
        let message = serde_json::json!({"eventType": event_type, "payload": payload});
        let (status, message) = self
            .post(&format!("/app/{app}/msg"), message)
            .await
            .unwrap();
        assert_eq!(status, 202, "{message}");
        message["id"].as_str().unwrap().to_owned()
    }

    /// GETs every page of the list at `path` (Svix's `iterator`/`done` envelope) and returns
    /// all items.
    pub async fn get_all(&self, path: &str) -> Vec<serde_json::Value> {
        let separator = if path.contains('?') { '&' } else { '?' };
        let mut items = Vec::new();
        let mut iterator: Option<String> = None;
        loop {
            let page_path = match &iterator {
                Some(it) => format!("{path}{separator}limit=250&iterator={it}"),
                None => format!("{path}{separator}limit=250"),
            };
            let page = self.get(&page_path).await;
            items.extend(page["data"].as_array().cloned().unwrap_or_default());
            match page["iterator"].as_str() {
                Some(next) if page["done"] == false => iterator = Some(next.to_owned()),
                _ => return items,
            }
        }
    }

    /// Creates an endpoint at `url` in `app`; returns its id.
    pub async fn endpoint(&self, app: &str, url: &str) -> String {
        let (status, ep) = self
            .post(
                &format!("/app/{app}/endpoint"),
                serde_json::json!({"url": url}),
            )
            .await
            .unwrap();
        assert_eq!(status, 201, "{ep}");
        ep["id"].as_str().unwrap().to_owned()
    }

    /// Creates an application with one endpoint at `url`; returns the application's id.
    pub async fn app_with_endpoint(&self, url: &str) -> String {
        let (status, app) = self
            .post("/app", serde_json::json!({"name": "e2e"}))
            .await
            .unwrap();
        assert_eq!(status, 201, "{app}");
        let app_id = app["id"].as_str().unwrap().to_owned();
        let (status, ep) = self
            .post(
                &format!("/app/{app_id}/endpoint"),
                serde_json::json!({"url": url}),
            )
            .await
            .unwrap();
        assert_eq!(status, 201, "{ep}");
        app_id
    }
}

impl Drop for Hookd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Retries `check` every 50 ms, for at most 20 s, until it is `Ok`; panics with its last
/// `Err` otherwise.
pub async fn eventually<T>(mut check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) => assert!(tokio::time::Instant::now() < deadline, "{last}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `GET path` (bounded) until `done` holds for the answer.
pub async fn wait_until(
    api: &Api,
    path: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    eventually(async || {
        let value = api.get(path).await;
        if done(&value) {
            Ok(value)
        } else {
            Err(format!("GET {path} never got there: {value}"))
        }
    })
    .await
}

#[allow(unused_imports)] // Each test binary uses a different part of this module.
pub use hookd_engine::testing::python;

/// hookd's shifted clock: an offset file for `HOOKD_TEST_CLOCK_OFFSET_FILE`, moved by rewriting
/// it, in a directory of its own that lives as long as this.
pub struct TestTime {
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl TestTime {
    /// An offset file at 0 (hookd's clock is the system time until [`TestTime::set`]).
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let time = Self {
            path: dir.path().join("clock-offset-ms"),
            _dir: dir,
        };
        time.set(0);
        time
    }

    /// Sets hookd's clock to `offset_ms` after the system time (atomically: write, rename).
    pub fn set(&self, offset_ms: u64) {
        let staging = self.path.with_extension("new");
        std::fs::write(&staging, offset_ms.to_string()).unwrap();
        std::fs::rename(&staging, &self.path).unwrap();
    }

    /// `hookd serve` on `database` (as [`Hookd::serve_local`]) running on this clock.
    pub fn serve_local(&self, database: &str, token: &str, extra: &[&str]) -> Hookd {
        Hookd::serve_local_with_env(database, token, extra, &[self.env()])
    }

    /// `hookd serve` with `args` (as [`Hookd::serve`]) running on this clock.
    pub fn serve(&self, args: &[&str]) -> Hookd {
        Hookd::serve_with_env(args, &[self.env()])
    }

    /// The offset file, for code outside the test (an SDK check) to move the clock itself.
    pub fn offset_file(&self) -> &str {
        self.path.to_str().unwrap()
    }

    fn env(&self) -> (&str, &str) {
        ("HOOKD_TEST_CLOCK_OFFSET_FILE", self.offset_file())
    }
}

/// A loopback address with nothing listening (bound once to pick a free port, then closed).
pub fn closed_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// Runs one of `scripts/crosscheck/*.py` with `args`; panics with its output if it fails.
pub fn run_python_script(python: &str, script: &str, args: &[&str]) -> String {
    let path = format!(
        "{}/../../scripts/crosscheck/{script}",
        env!("CARGO_MANIFEST_DIR")
    );
    let output = Command::new(python)
        .arg(&path)
        .args(args)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}
