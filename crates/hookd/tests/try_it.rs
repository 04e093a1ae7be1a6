//! The README's "Try it in a minute", run word for word: its shell block is read from the
//! README and run by `bash` with the built `hookd` first on the PATH, so the walk-through a
//! newcomer pastes cannot rot. And `serve --dev`, which the walk-through relies on, is refused
//! beside `--production`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The first ```sh block after the README heading `## Try it in a minute`.
fn walk_through() -> String {
    let readme = include_str!("../../../README.md");
    let section = readme
        .split("\n## Try it in a minute\n")
        .nth(1)
        .expect("README has a 'Try it in a minute' section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the section has a ```sh block");
    block.to_owned()
}

/// A shell running the walk-through in its own process group, killed (with everything it
/// started in the background) when dropped.
struct Shell {
    child: std::process::Child,
}

impl Drop for Shell {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

#[test]
fn the_readme_walk_through_delivers_a_verified_event_to_hookd_listen() {
    use std::os::unix::process::CommandExt;

    let dir = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_hookd"))
        .parent()
        .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut command = Command::new("bash");
    command
        .args(["-c", &walk_through()])
        .current_dir(dir.path())
        .env("PATH", path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("HOOKD_")) {
        command.env_remove(name);
    }
    let mut shell = Shell {
        child: command.spawn().expect("run bash"),
    };

    let (lines, output) = mpsc::channel();
    let stdout = shell.child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut printed = Vec::new();
    while !printed.iter().any(|l: &String| l == "verified: yes") {
        match output.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => printed.push(line),
            Err(_) => panic!(
                "no verified delivery; the walk-through printed:\n{}",
                printed.join("\n")
            ),
        }
    }
    let printed = printed.join("\n");
    for expected in [
        "development mode: http:// endpoints on this machine are allowed",
        "portal:  http://127.0.0.1:8071/portal/",
        "POST /webhooks",
        "\"type\": \"order.shipped\"",
        "\"orderId\": 1003",
    ] {
        assert!(
            printed.contains(expected),
            "{expected:?} missing:\n{printed}"
        );
    }
    // What the portal's message list shows: the message delivered to its one endpoint.
    let delivered = serde_json::json!({"succeeded": 1, "pending": 0, "failed": 0});
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut list = serde_json::Value::Null;
    for _ in 0..200 {
        list = runtime.block_on(async {
            let response = reqwest::Client::new()
                .get("http://127.0.0.1:8071/api/v1/app/acme/msg")
                .bearer_auth("dev-token")
                .send()
                .await
                .unwrap();
            response.json::<serde_json::Value>().await.unwrap()
        });
        if list["data"][0]["deliveries"] == delivered {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(list["data"][0]["deliveries"], delivered, "{list}");
    drop(shell);
}

#[test]
fn dev_mode_is_refused_beside_production() {
    let output = Command::new(env!("CARGO_BIN_EXE_hookd"))
        .args(["serve", "--dev", "--production"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("'--dev' cannot be used with '--production'"),
        "{stderr}"
    );
}
