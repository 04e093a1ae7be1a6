//! End-to-end helpers: the real `hookd` binary as a child process, and the Python interpreter
//! that runs code we did not write against it.

#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `hookd serve`, killed when dropped.
pub struct Hookd {
    pub base_url: String,
    child: Child,
}

impl Hookd {
    /// Starts `hookd serve` on a free loopback port with `args` added, and waits until it
    /// prints the address it listens on.
    pub fn serve(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hookd"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("HOOKD_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start hookd");
        let stdout = child.stdout.take().expect("piped stdout");
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut lines = BufReader::new(stdout).lines();
        let base_url = loop {
            assert!(Instant::now() < deadline, "hookd did not start in time");
            let line = lines
                .next()
                .expect("hookd exited before listening")
                .expect("read stdout");
            if let Some(url) = line.strip_prefix("hookd listening on ") {
                break url.to_owned();
            }
        };
        Self { base_url, child }
    }
}

impl Drop for Hookd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The interpreter with the reference libraries, or `None` (after saying so) when the test is
/// to be skipped; `HOOKD_TEST_REQUIRE_PYTHON=1` (CI) turns a missing one into a failure.
pub fn python() -> Option<String> {
    match std::env::var("HOOKD_TEST_PYTHON") {
        Ok(python) if !python.is_empty() => Some(python),
        _ if std::env::var("HOOKD_TEST_REQUIRE_PYTHON").as_deref() == Ok("1") => {
            panic!("HOOKD_TEST_PYTHON not set, and HOOKD_TEST_REQUIRE_PYTHON=1 requires it")
        }
        _ => {
            let _ = writeln!(std::io::stderr(), "SKIPPED: HOOKD_TEST_PYTHON not set");
            None
        }
    }
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
