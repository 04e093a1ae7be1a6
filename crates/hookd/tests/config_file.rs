//! `--config FILE` with the real binary: the complete example in docs/deployment.md names every
//! option and `hookd config show` reads each from its line; flag, environment, file and
//! default take precedence in that order; a wrong key or value stops hookd naming its line; and
//! `serve` runs with what the file says.

mod support;

use std::collections::BTreeSet;
use std::process::{Command, Output};

use serde_json::json;
use support::{Api, Hookd};

/// The ```toml block of docs/deployment.md's "Configuration file" section.
fn documented_example() -> String {
    let doc = include_str!("../../../docs/deployment.md");
    doc.split("\n## Configuration file\n")
        .nth(1)
        .and_then(|section| section.split("```toml\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("docs/deployment.md has a Configuration file section with a toml block")
        .to_owned()
}

fn hookd(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hookd"));
    command.args(args).envs(env.iter().copied());
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("HOOKD_")) {
        command.env_remove(name);
    }
    command.output().unwrap()
}

fn write(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("hookd.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// `config show`'s settings: the key of each line and the rest of it.
fn shown(output: &Output) -> Vec<(String, String)> {
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.starts_with("# hookd") && !line.starts_with("# precedence"))
        .map(|line| {
            let key = line
                .trim_start_matches("# ")
                .split([' ', '='])
                .next()
                .unwrap();
            (key.to_owned(), line.to_owned())
        })
        .collect()
}

#[test]
fn the_documented_example_names_every_option_and_show_reads_each_from_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let example = documented_example();
    let path = write(&dir, &example);
    let settings = shown(&hookd(&["config", "show", "--config", &path], &[]));

    let options: BTreeSet<&str> = settings.iter().map(|(key, _)| key.as_str()).collect();
    let documented: BTreeSet<&str> = example
        .lines()
        .filter(|line| !line.starts_with('#') && line.contains('='))
        .map(|line| line.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        documented, options,
        "the example and serve's options differ"
    );

    for (key, line) in &settings {
        let at = example
            .lines()
            .position(|l| l.starts_with(&format!("{key} ")))
            .unwrap()
            + 1;
        // `false` and `[]` add nothing to the defaults; every other value comes from the file.
        let sets_nothing = ["[]", "false"]
            .iter()
            .any(|empty| example.contains(&format!("{key} = {empty}")));
        let origin = if sets_nothing {
            "# default".to_owned()
        } else {
            format!("# file {path}:{at}")
        };
        assert!(
            line.ends_with(&origin) || (sets_nothing && line.ends_with("# not set")),
            "{line}"
        );
    }
    let line = |key: &str| &settings.iter().find(|(k, _)| k == key).unwrap().1;
    for secret in ["admin-token", "metrics-token"] {
        assert!(line(secret).contains("\"********\""), "{}", line(secret));
    }
    assert!(
        line("database").contains("postgres://hookd:********@db.internal/hookd"),
        "{}",
        line("database")
    );
    assert!(line("allow-subnet").contains("[\"10.20.0.0/16\"]"));
    assert!(line("workers").starts_with("workers = 512 "));
    assert!(line("production").starts_with("production = true "));
}

#[test]
fn a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "workers = 11\nlease = \"2m\"\nretention = \"7d\"\n");
    let output = hookd(
        &["config", "show", "--config", &path, "--workers", "33"],
        &[("HOOKD_WORKERS", "22"), ("HOOKD_LEASE", "3m")],
    );
    let settings = shown(&output);
    let line = |key: &str| settings.iter().find(|(k, _)| k == key).unwrap().1.clone();
    assert!(
        line("workers").starts_with("workers = 33 "),
        "{}",
        line("workers")
    );
    assert!(line("workers").ends_with("# command line"));
    assert!(
        line("lease").starts_with("lease = \"3m\" "),
        "{}",
        line("lease")
    );
    assert!(line("lease").ends_with("# environment HOOKD_LEASE"));
    assert!(line("retention").starts_with("retention = \"7d\" "));
    assert!(line("retention").ends_with(&format!("# file {path}:3")));
    assert!(line("attempt-timeout").ends_with("# default"));
    assert!(line("egress-proxy").starts_with("# egress-proxy "));
}

#[test]
fn an_unknown_key_or_a_refused_value_stops_hookd_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("workers = 4\nwrkers = 8\n", ":2: unknown key `wrkers`"),
        (
            "\nworkers = \"many\"\n",
            ":2: `workers`: invalid value 'many'",
        ),
        (
            "listen = [\"a\", \"b\"]\n",
            ":1: `listen`: takes one value, not a list",
        ),
        ("dev = \"yes\"\n", ":1: `dev`: expected true or false"),
        ("config = \"other.toml\"\n", ":1: unknown key `config`"),
        ("workers = \n", "hookd.toml"),
    ];
    for (text, expected) in cases {
        let path = write(&dir, text);
        let output = hookd(&["serve", "--config", &path], &[]);
        assert_eq!(output.status.code(), Some(2), "{text}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{text:?}: {stderr}");
    }
}

#[tokio::test]
async fn serve_runs_with_the_files_token_and_delivery_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (database, _db_dir) = hookd_store::testing::fresh_sqlite();
    let path = write(
        &dir,
        &format!(
            "database = \"{database}\"\nadmin-token = \"file-token\"\n\
             allow-http-endpoints = true\nallow-subnet = [\"127.0.0.0/8\"]\n"
        ),
    );
    let hookd = Hookd::serve(&["--config", &path]);
    let api = Api::new(&hookd, "file-token");
    let (status, app) = api.post("/app", json!({"name": "cfg"})).await.unwrap();
    assert_eq!(status, 201, "the file's admin token: {app}");
    let url = "http://127.0.0.1:9/hook";
    let (status, endpoint) = api
        .post(
            &format!("/app/{}/endpoint", app["id"].as_str().unwrap()),
            json!({"url": url}),
        )
        .await
        .unwrap();
    assert_eq!(
        status, 201,
        "the file's http:// and loopback rules: {endpoint}"
    );
}
