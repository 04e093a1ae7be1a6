//! The password of a URL hookd is given never leaves it: the real binary's `config show`, its
//! start-up and command errors (a driver's, the argument parser's, a configuration file's) and
//! its outbox relay's log lines show `********` for a userinfo password and for secret query
//! parameters (`?password=`, `?sslpassword=`), and keep the rest of the URL.

mod support;

use std::process::{Command, Output, Stdio};

use support::{Hookd, closed_port, eventually};

const TOKEN: &str = "url-passwords-admin-token";
/// Every secret the tests put in a URL; none may be printed.
const SECRETS: [&str; 4] = ["pw1-Secret", "pw2-Secret", "pw3-Secret", "pw4-Secret"];

fn hookd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookd"))
        .args(args)
        .env("HOOKD_MASTER_KEY", support::TEST_MASTER_KEY)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// stdout and stderr of `output`, asserting no secret is in either.
fn shown_without_secrets(output: &Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} shows {secret}:\n{text}");
    }
    text
}

/// A PostgreSQL URL with a password in its userinfo and another in its query, at `port`.
fn postgres_url(port: u16) -> String {
    format!(
        "postgres://hookd:pw1-Secret@127.0.0.1:{port}/hookd?sslmode=disable&password=pw2-Secret"
    )
}

#[test]
fn config_show_masks_every_url_password_and_keeps_the_rest() {
    let shown = hookd(&[
        "config",
        "show",
        "--database",
        &postgres_url(5432),
        "--outbox-source",
        "orders=mysql://app:pw3-Secret@db.example/shop?ssl-mode=REQUIRED",
        "--smtp-url",
        "smtps://notices@smtp.example.com?sslpassword=pw4-Secret",
        "--smtp-from",
        "webhooks@example.com",
    ]);
    assert!(shown.status.success());
    let text = shown_without_secrets(&shown, "config show");
    for kept in [
        "postgres://hookd:********@127.0.0.1:5432/hookd?sslmode=disable&password=********",
        "orders=mysql://app:********@db.example/shop?ssl-mode=REQUIRED",
        "smtps://notices@smtp.example.com?sslpassword=********",
    ] {
        assert!(text.contains(kept), "{kept} expected in:\n{text}");
    }
}

#[test]
fn urls_from_the_environment_are_masked_in_help_and_config_show() {
    let env = [
        ("HOOKD_DATABASE_URL", postgres_url(5432)),
        (
            "HOOKD_OUTBOX_SOURCES",
            "orders=mysql://app:pw3-Secret@db.example/shop".to_owned(),
        ),
        (
            "HOOKD_SMTP_URL",
            "smtps://notices:pw4-Secret@smtp.example.com".to_owned(),
        ),
        (
            "HOOKD_EGRESS_PROXY",
            "http://egress:pw4-Secret@proxy.example:3128".to_owned(),
        ),
        (
            "HOOKD_OTLP_ENDPOINT",
            "https://otel:pw4-Secret@collector.example".to_owned(),
        ),
    ];
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hookd"))
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("HOOKD_SMTP_FROM", "webhooks@example.com")
            .output()
            .unwrap()
    };
    for args in [&["serve", "--help"][..], &["config", "show", "--help"]] {
        shown_without_secrets(&run(args), &args.join(" "));
    }
    let shown = run(&["config", "show"]);
    assert!(shown.status.success());
    let text = shown_without_secrets(&shown, "config show");
    for kept in [
        "postgres://hookd:********@127.0.0.1:5432/hookd",
        "orders=mysql://app:********@db.example/shop",
        "smtps://notices:********@smtp.example.com",
        "http://egress:********@proxy.example:3128",
        "https://otel:********@collector.example",
    ] {
        assert!(text.contains(kept), "{kept} expected in:\n{text}");
    }
}

#[test]
fn start_up_and_command_errors_mask_url_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap();
    let closed = postgres_url(closed_port().port());
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir];
        args.extend_from_slice(&["--admin-token", TOKEN]);
        args.extend_from_slice(extra);
        hookd(&args)
    };
    let file = dir.path().join("hookd.toml");
    // An unterminated string: the parser's error quotes the line.
    std::fs::write(&file, format!("database = \"{closed}\n")).unwrap();
    let failures = [
        (
            "serve against a closed port",
            serve(&["--database", &closed]),
            "cannot open the database",
        ),
        (
            "migrate against a closed port",
            hookd(&["migrate", "--database", &closed]),
            "cannot open the database",
        ),
        (
            "an unsupported database",
            serve(&["--database", "redis://u:pw3-Secret@127.0.0.1/0"]),
            "unsupported database URL",
        ),
        (
            "an unsupported outbox source",
            serve(&[
                "--outbox-source",
                "orders=redis://u:pw3-Secret@h/0?token=pw4-Secret",
            ]),
            "unsupported outbox source URL",
        ),
        (
            "a configuration file that is not TOML",
            serve(&["--config", file.to_str().unwrap()]),
            "hookd.toml",
        ),
        (
            "outbox install against a closed port",
            hookd(&["outbox", "install", "--source", &closed]),
            "cannot install the outbox table",
        ),
        (
            "outbox install on MySQL against a closed port",
            hookd(&[
                "outbox",
                "install",
                "--source",
                &format!(
                    "mysql://root:pw3-Secret@127.0.0.1:{}/shop?password=pw4-Secret",
                    closed_port().port()
                ),
            ]),
            "cannot install the outbox table",
        ),
    ];
    for (what, output, says) in failures {
        assert!(!output.status.success(), "{what} succeeded");
        let text = shown_without_secrets(&output, what);
        assert!(
            text.contains(says) && text.contains("********"),
            "{what}: {says:?} and a masked URL expected:\n{text}"
        );
    }
}

#[tokio::test]
async fn the_outbox_relay_logs_its_source_masked() {
    let (database, dir) = hookd_store::testing::fresh_sqlite();
    let log = dir.path().join("hookd.log");
    let source = format!("orders={}", postgres_url(closed_port().port()));
    let hookd = Hookd::serve_local_with(
        &database,
        TOKEN,
        &["--outbox-source", &source],
        &[("HOOKD_LOG", "info")],
        Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let logged = eventually(async || {
        let text = std::fs::read_to_string(&log).unwrap();
        match text.contains("cannot relay the outbox source") {
            true => Ok(text),
            false => Err(format!("a relay failure expected in the log:\n{text}")),
        }
    })
    .await;
    drop(hookd);
    for secret in SECRETS {
        assert!(
            !logged.contains(secret),
            "the log shows {secret}:\n{logged}"
        );
    }
    assert!(
        logged.contains("postgres://hookd:********@127.0.0.1"),
        "the relay names its source, masked:\n{logged}"
    );
    assert!(logged.contains("password=********"), "{logged}");
}
