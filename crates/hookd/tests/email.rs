//! E-mail notices end to end: the real `hookd serve` with `--smtp-url` tells a customer, at
//! the `notifyEmail` of their endpoint's metadata (or their application's), that hookd
//! disabled the endpoint and that a message was given up on, through a real SMTP server
//! (Python's `aiosmtpd`, `scripts/crosscheck/smtp_server.py`); an address gets no more than
//! `--notices-per-hour`; a `notifyEmail` that is not an address is refused; what the customer
//! wrote (the application's name, the endpoint's URL) is only ever quoted, never prose.

mod support;

use std::process::Command;

use axum::http::StatusCode;
use hookd_engine::testing::{Receiver, python};
use serde_json::{Value, json};
use support::process::{Announced, crosscheck_server};
use support::{Api, Hookd, eventually, wait_until};

const TOKEN: &str = "email-test-admin-token";

fn smtp_server(python: &str) -> (Announced, String) {
    let server = crosscheck_server(python, "smtp_server.py");
    let address = server.url.trim_start_matches("http://").to_owned();
    (server, format!("smtp://{address}"))
}

/// `hookd serve` on `database` mailing notices through `smtp_url`, each message given up on
/// after one attempt, with `extra` options.
fn serve_mailing(database: &str, smtp_url: &str, extra: &[&str]) -> Hookd {
    let mut args = vec![
        "--smtp-url",
        smtp_url,
        "--smtp-from",
        "Example Webhooks <webhooks@example.com>",
        "--retry-schedule",
        "0",
    ];
    args.extend_from_slice(extra);
    Hookd::serve_local(database, TOKEN, &args)
}

/// The mails the server printed so far.
fn mails(server: &Announced) -> Vec<Value> {
    server
        .output()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[tokio::test]
async fn customers_hear_of_disabled_endpoints_and_exhausted_messages() {
    let Some(python) = python() else { return };
    let (server, smtp_url) = smtp_server(&python);
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = serve_mailing(&database, &smtp_url, &["--notices-per-hour", "2"]);
    let api = Api::new(&hookd, TOKEN);

    let (status, refused) = api
        .post(
            "/app",
            json!({"name": "Typo", "metadata": {"notifyEmail": "ops.example.com"}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 422, "{refused}");
    assert!(refused.to_string().contains("notifyEmail"), "{refused}");

    let (status, app) = api
        .post(
            "/app",
            json!({"name": "Bookstore", "metadata": {"notifyEmail": "team@bookstore.example"}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{app}");
    let app = app["id"].as_str().unwrap().to_owned();
    // Gone: hookd disables it at the first answer.
    let gone = Receiver::always(StatusCode::GONE).await;
    let (status, ep) = api
        .post(
            &format!("/app/{app}/endpoint"),
            json!({"url": gone.url, "metadata": {"notifyEmail": "hooks@bookstore.example"}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{ep}");
    // Failing: one attempt (`--retry-schedule 0`), then the message is given up on.
    let failing = Receiver::always(StatusCode::INTERNAL_SERVER_ERROR).await;
    api.endpoint(&app, &failing.url).await;

    let msg = api.publish(&app, "order.shipped", json!({"n": 1})).await;
    wait_until(&api, &format!("/app/{app}/msg/{msg}/endpoint"), |d| {
        d["data"]
            .as_array()
            .is_some_and(|all| all.iter().all(|d| d["statusText"] == "fail"))
    })
    .await;

    let to = |m: &Value| m["to"][0].as_str().unwrap_or_default().to_owned();
    let about = |m: &Value, subject: &str| {
        m["subject"]
            .as_str()
            .unwrap_or_default()
            .starts_with(subject)
    };
    let received = eventually(async || {
        let all = mails(&server);
        let disabled = all.iter().any(|m| about(m, "Webhook endpoint disabled"));
        let exhausted = all
            .iter()
            .any(|m| about(m, "Webhook not delivered") && to(m) == "team@bookstore.example");
        match disabled && exhausted {
            true => Ok(all),
            false => Err(format!(
                "a disabled and an exhausted notice expected: {all:?}"
            )),
        }
    })
    .await;
    let disabled = received
        .iter()
        .find(|m| about(m, "Webhook endpoint disabled"))
        .unwrap();
    assert_eq!(
        to(disabled),
        "hooks@bookstore.example",
        "the endpoint's own address"
    );
    assert_eq!(disabled["from"], "webhooks@example.com");
    let body = disabled["body"].as_str().unwrap();
    assert!(
        body.contains("Bookstore") && body.contains(&gone.url),
        "{body}"
    );
    let exhausted = received
        .iter()
        .find(|m| about(m, "Webhook not delivered") && to(m) == "team@bookstore.example")
        .unwrap();
    let body = exhausted["body"].as_str().unwrap();
    assert!(
        body.contains(&msg) && body.contains(&failing.url),
        "the application's address, for the endpoint without one: {body}"
    );

    // Two an hour: the application's address has had one; of three more given up on, one
    // more reaches it.
    for n in 2..5 {
        api.publish(&app, "order.shipped", json!({"n": n})).await;
    }
    let metrics = || async {
        let page = reqwest::get(format!("{}/metrics", hookd.base_url))
            .await
            .unwrap();
        page.text().await.unwrap()
    };
    eventually(async || {
        let text = metrics().await;
        let limited = text
            .lines()
            .find_map(|l| l.strip_prefix(r#"hookd_notices_total{result="rate_limited"} "#))
            .and_then(|n| n.parse::<f64>().ok());
        match limited {
            Some(n) if n >= 2.0 => Ok(()),
            _ => Err(format!("two notices rate-limited expected:\n{text}")),
        }
    })
    .await;
    let to_team = mails(&server)
        .iter()
        .filter(|m| to(m) == "team@bookstore.example")
        .count();
    assert_eq!(to_team, 2, "no more than --notices-per-hour");
}

#[tokio::test]
async fn customer_text_in_a_notice_is_quoted_and_cannot_write_a_paragraph() {
    let Some(python) = python() else { return };
    let (server, smtp_url) = smtp_server(&python);
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = serve_mailing(&database, &smtp_url, &[]);
    let api = Api::new(&hookd, TOKEN);
    // A name may hold quotes; it must not close the quotes it is shown in.
    let name = r#"Acme" Dear customer, your account is suspended. "#;
    let (status, app) = api
        .post(
            "/app",
            json!({"name": name, "metadata": {"notifyEmail": "victim@example.org"}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{app}");
    let app = app["id"].as_str().unwrap().to_owned();
    let failing = Receiver::always(StatusCode::INTERNAL_SERVER_ERROR).await;
    let paragraph = "\r\n\r\nDear customer, your account is suspended.\r\nLog in at evil.example";
    let (status, refused) = api
        .post(
            &format!("/app/{app}/endpoint"),
            json!({"url": format!("{}{paragraph}", failing.url)}),
        )
        .await
        .unwrap();
    assert_eq!(status, 422, "a URL with line breaks is refused: {refused}");
    let ep = api.endpoint(&app, &failing.url).await;
    // As a URL stored before hookd refused line breaks would be.
    let file = database.strip_prefix("sqlite://").unwrap();
    let db = rusqlite::Connection::open(file).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    let stored = format!("{}/x{paragraph}", failing.url);
    db.execute(
        "UPDATE endpoints SET url = ?1 WHERE id = ?2",
        rusqlite::params![stored, ep],
    )
    .unwrap();

    // Given up on after its one attempt (however the URL fares), the message is noticed.
    let msg = api.publish(&app, "order.shipped", json!({"n": 1})).await;
    let mail = eventually(async || {
        let all = mails(&server);
        all.into_iter()
            .next()
            .ok_or_else(|| "a notice expected".to_owned())
    })
    .await;
    assert_eq!(mail["subject"], format!("Webhook not delivered: {msg}"));
    let body = mail["body"].as_str().unwrap().replace("\r\n", "\n");
    let url_line = format!(
        "  URL: \"{}/x\\u{{000D}}\\u{{000A}}\\u{{000D}}\\u{{000A}}Dear customer, your account is \
         suspended.\\u{{000D}}\\u{{000A}}Log in at evil.example\"\n",
        failing.url
    );
    assert!(body.contains(&format!("Endpoint: {ep}\n")), "{body}");
    assert!(body.contains(&url_line), "{url_line:?} in:\n{body}");
    assert!(
        body.contains("  Application: \"Acme\\\" Dear customer, your account is suspended. \"\n"),
        "{body}"
    );
    assert!(
        body.lines().all(|line| !line.contains("Dear customer")
            || line.starts_with("  Application: \"")
            || line.starts_with("  URL: \"")),
        "the customer's words only on the quoted lines:\n{body}"
    );
}

#[test]
fn smtp_settings_that_cannot_work_are_refused_at_start() {
    let (database, dir) = hookd_store::testing::fresh_sqlite();
    let refused = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_hookd"))
            .args(["serve", "--listen", "127.0.0.1:0", "--database", &database])
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--admin-token", TOKEN])
            .args(args)
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?} started");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let no_sender = refused(&["--smtp-url", "smtps://smtp.example.com"]);
    assert!(no_sender.contains("--smtp-from"), "{no_sender}");
    let in_clear = refused(&[
        "--smtp-url",
        "smtp://notices:secret@smtp.example.com",
        "--smtp-from",
        "webhooks@example.com",
    ]);
    assert!(in_clear.contains("in the clear"), "{in_clear}");
    let bad_sender = refused(&[
        "--smtp-url",
        "smtps://smtp.example.com",
        "--smtp-from",
        "not an address",
    ]);
    assert!(bad_sender.contains("--smtp-from"), "{bad_sender}");
}
