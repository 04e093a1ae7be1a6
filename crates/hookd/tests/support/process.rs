//! Programs under test that are not hookd (`hookd listen`, the example receivers in Python and
//! Node) as child processes: started, their first "… at/on http://…" line read for their URL,
//! the rest of their output kept for assertions, killed when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running child process that announced its URL on stdout.
pub struct Announced {
    /// The `http://…` URL from its first line.
    pub url: String,
    lines: Arc<Mutex<Vec<String>>>,
    child: Child,
}

impl Announced {
    /// Starts `command` and waits (bounded) for a stdout line containing `http://`.
    pub fn start(mut command: Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {command:?}: {e}"));
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let deadline = Instant::now() + Duration::from_secs(60);
        let url = loop {
            assert!(
                Instant::now() < deadline,
                "{command:?} did not start in time"
            );
            let line = match stdout.next() {
                Some(Ok(line)) => line,
                _ => panic!(
                    "{command:?} exited before announcing its URL: {:?}",
                    child.wait()
                ),
            };
            if let Some(at) = line.find("http://") {
                let url = line[at..].split_whitespace().next().unwrap_or_default();
                break url.to_owned();
            }
        };
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in stdout.map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Self { url, lines, child }
    }

    /// Everything it printed after its first line, so far.
    pub fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits (bounded) until its output holds `pattern` at least `count` times; returns the
    /// output.
    pub async fn wait_for_output(&self, pattern: &str, count: usize) -> String {
        super::eventually(async || {
            let output = self.output();
            if output.matches(pattern).count() >= count {
                Ok(output)
            } else {
                Err(format!(
                    "never printed {pattern:?} {count} times; printed:\n{output}"
                ))
            }
        })
        .await
    }
}

impl Drop for Announced {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `scripts/crosscheck/<script>` (a server that announces its URL) under `python`.
pub fn crosscheck_server(python: &str, script: &str) -> Announced {
    let path = format!(
        "{}/../../scripts/crosscheck/{script}",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut command = Command::new(python);
    command.arg(path);
    Announced::start(command)
}

/// The example receivers' directory, `examples/receivers/<language>` at the workspace root.
pub fn example_dir(language: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../examples/receivers/{language}"))
}

/// `node` with the Node receiver's packages installed (see [`node_packages`]), or `None`
/// (after saying so) when the test is to be skipped.
pub fn node() -> Option<&'static str> {
    node_packages(&example_dir("node"), "standardwebhooks")
}

/// The official Svix JavaScript SDK's package folder (`node_modules/svix`), installed from
/// `scripts/crosscheck/svix-js`'s committed lockfile (see [`node_packages`]), or `None` (after
/// saying so) when the test is to be skipped.
pub fn svix_js_package() -> Option<std::path::PathBuf> {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/crosscheck/svix-js");
    node_packages(&dir, "svix")?;
    Some(dir.join("node_modules/svix"))
}

/// `node`, with the packages of the npm project in `dir` installed (`npm ci` from its committed
/// lockfile when `package` is missing), or `None` (after saying so) when the test is to be
/// skipped; `HOOKD_TEST_REQUIRE_NODE=1` (CI) turns a missing Node or npm into a failure.
pub fn node_packages(dir: &std::path::Path, package: &str) -> Option<&'static str> {
    let runs = |program: &str| {
        Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !runs("node") || !runs("npm") {
        if std::env::var("HOOKD_TEST_REQUIRE_NODE").as_deref() == Ok("1") {
            panic!("node and npm are not on PATH, and HOOKD_TEST_REQUIRE_NODE=1 requires them");
        }
        println!("SKIPPED: node or npm not on PATH");
        return None;
    }
    // Tests asking at once would run `npm ci` in one directory at once, each removing the
    // other's files: the first installs, the rest wait for it (a lock on the lockfile, which
    // `npm ci` only reads, so test processes wait for each other too).
    let lockfile = std::fs::File::open(dir.join("package-lock.json")).expect("open the lockfile");
    lockfile.lock().expect("lock the lockfile");
    if !dir.join("node_modules").join(package).exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(dir)
            .status()
            .expect("run npm ci");
        assert!(status.success(), "npm ci in {} failed", dir.display());
    }
    Some("node")
}
