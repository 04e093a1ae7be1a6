//! Nothing a token, secret or credential could be recovered from rests in clear: the real
//! `hookd` binary is handed or made every kind of token and secret it has (the first-start
//! admin token, tokens from `/auth/token`, a portal token and link, endpoint secrets supplied
//! and generated, `v1a` keys, rotated secrets, credential header values), mostly with an
//! `Idempotency-Key` as the Svix SDKs send one, and then the database's files are searched for
//! each secret's text and for the encodings its stored form could take.
//!
//! SQLite: the database file and its `-wal` and `-shm` files, while hookd runs, after a WAL
//! checkpoint, and after hookd stopped. PostgreSQL: every table of hookd's schema dumped as
//! text (bytea shows as hex), and, when the server's data directory is readable (a local
//! server, CI running as root), the database's own files after a `CHECKPOINT` and the WAL
//! segments written during the test.
//!
//! Credential headers are also shown by name only to customers' tokens, and sent as they are.

mod support;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hookd_engine::testing::Receiver;
use serde_json::{Value, json};
use support::{Api, Hookd, TEST_MASTER_KEY};
use webhook_signature::{Ed25519SecretKey, Secret};

/// A header name only the operator's `--sensitive-header` makes a credential.
const OPERATOR_HEADER: &str = "X-Shop-Passphrase";

/// Every secret of the test, with the byte strings any of whose presence in a file gives it
/// away.
#[derive(Default)]
struct Secrets(Vec<(String, Vec<Vec<u8>>)>);

impl Secrets {
    /// A secret stored, if at all, as text: its text, and that text as hex (PostgreSQL shows
    /// bytea so) and as base64.
    fn text(&mut self, what: &str, text: &str) {
        assert!(
            text.len() >= 12,
            "{what} is too short to search for: {text:?}"
        );
        let forms = vec![
            text.as_bytes().to_vec(),
            hex::encode(text).into_bytes(),
            STANDARD.encode(text).into_bytes(),
        ];
        self.0.push((what.to_owned(), forms));
    }

    /// A key or token: its text forms, and its key bytes raw, as hex and as base64.
    fn key(&mut self, what: &str, text: &str) {
        self.text(what, text);
        let raw = match text.split_once('_') {
            Some(("hookd", hex_part)) => hex::decode(hex_part).unwrap(),
            Some((_, b64)) => STANDARD.decode(b64).unwrap(),
            None => panic!("{what} is not a prefixed key: {text}"),
        };
        let forms = &mut self.0.last_mut().unwrap().1;
        forms.extend([
            hex::encode(&raw).into_bytes(),
            STANDARD.encode(&raw).into_bytes(),
            raw,
        ]);
    }

    /// The secrets `bytes` (from `place`) gives away.
    fn found_in(&self, place: &str, bytes: &[u8]) -> Vec<String> {
        self.0
            .iter()
            .filter(|(_, forms)| {
                forms
                    .iter()
                    .any(|form| memchr::memmem::find(bytes, form).is_some())
            })
            .map(|(what, _)| format!("{what} in {place}"))
            .collect()
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

/// A client sending every POST with a fresh `Idempotency-Key`, as the Python SDK does.
struct Client(Api);

impl Client {
    fn new(hookd: &Hookd, token: &str) -> Self {
        Self(Api::new(hookd, token))
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let key = format!("idem-{}", hex::encode(Secret::generate().as_bytes()));
        let idempotent = [("idempotency-key", key.as_str())];
        let headers: &[_] = if method == reqwest::Method::POST {
            &idempotent
        } else {
            &[]
        };
        self.0.call(method, path, body, headers).await
    }

    /// POSTs `body`, asserting `want`; the answer.
    async fn post(&self, path: &str, body: Value, want: u16) -> Value {
        let (status, answer) = self.send(reqwest::Method::POST, path, Some(body)).await;
        assert_eq!(status, want, "POST {path}: {answer}");
        answer
    }

    async fn get(&self, path: &str) -> Value {
        let (status, answer) = self.send(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {answer}");
        answer
    }

    async fn put(&self, path: &str, body: Value, want: u16) -> Value {
        let (status, answer) = self.send(reqwest::Method::PUT, path, Some(body)).await;
        assert_eq!(status, want, "PUT {path}: {answer}");
        answer
    }

    async fn patch(&self, path: &str, body: Value) {
        let (status, answer) = self.send(reqwest::Method::PATCH, path, Some(body)).await;
        assert_eq!(status, 204, "PATCH {path}: {answer}");
    }
}

/// A fresh random credential value, unique to the test.
fn credential(kind: &str) -> String {
    format!("{kind}-{}", hex::encode(Secret::generate().as_bytes()))
}

/// The token `hookd serve` printed on first start.
fn first_start_token(hookd: &Hookd) -> String {
    let at = hookd
        .startup
        .iter()
        .position(|l| l.starts_with("Created the admin token"))
        .unwrap_or_else(|| panic!("no first-start token printed: {:?}", hookd.startup));
    hookd.startup[at + 1].trim().to_owned()
}

/// What the test made: every secret, and the paths the display checks read.
struct Made {
    secrets: Secrets,
    /// A header value stored in clear on purpose: each search must find it, or it searched
    /// in the wrong place.
    canary: String,
    app: String,
    headers_path: String,
    app_token: String,
    read_only_token: String,
    portal_token: String,
    credentials: Vec<(&'static str, String)>,
}

/// Starts hookd on `database` (no admin token configured: it makes one) with a receiver, and
/// has it make or take every kind of token and secret, delivering one message with the
/// credential headers.
async fn make_every_secret(database: &str) -> (Hookd, Made) {
    let hookd = Hookd::serve(&[
        "--database",
        database,
        "--allow-http-endpoints",
        "--allow-subnet",
        "127.0.0.0/8",
        "--sensitive-header",
        OPERATOR_HEADER,
    ]);
    let mut secrets = Secrets::default();
    let first = first_start_token(&hookd);
    secrets.key("the first-start admin token", &first);
    secrets.key("the master key", &format!("mk_{TEST_MASTER_KEY}"));
    let admin = Client::new(&hookd, &first);

    let mut token = async |what: &str, body: Value| {
        let token = admin.post("/auth/token", body, 201).await["token"]
            .as_str()
            .unwrap()
            .to_owned();
        secrets.key(what, &token);
        token
    };
    let app = admin.post("/app", json!({"name": "shop"}), 201).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    token("an admin token", json!({"name": "ops"})).await;
    let app_token = token("an app token", json!({"name": "c", "appId": app})).await;
    let read_only_token = token("a read-only token", json!({"readOnly": true})).await;
    let portal = admin
        .post(&format!("/auth/app-portal-access/{app}"), json!({}), 200)
        .await;
    let portal_token = portal["token"].as_str().unwrap().to_owned();
    secrets.key("a portal token", &portal_token);
    secrets.text("a portal link", portal["url"].as_str().unwrap());

    let receiver = Receiver::always(axum::http::StatusCode::NO_CONTENT).await;
    let credentials = vec![
        ("Authorization", format!("Bearer {}", credential("auth"))),
        ("X-Api-Key", credential("apikey")),
        ("X-Session-Token", credential("session")),
        (OPERATOR_HEADER, credential("operator")),
    ];
    for (name, value) in &credentials {
        secrets.text(&format!("header {name}"), value);
    }
    let mut headers: serde_json::Map<String, Value> = credentials
        .iter()
        .map(|(n, v)| ((*n).to_owned(), json!(v)))
        .collect();
    let canary = format!("tenant-{}", hex::encode(Secret::generate().as_bytes()));
    headers.insert("X-Tenant".into(), json!(canary));
    let supplied = Secret::generate().to_string();
    secrets.key("a supplied endpoint secret", &supplied);
    let endpoints = format!("/app/{app}/endpoint");
    let ep = admin
        .post(
            &endpoints,
            json!({"url": receiver.url, "secret": supplied, "headers": headers}),
            201,
        )
        .await;
    let ep_path = format!("{endpoints}/{}", ep["id"].as_str().unwrap());
    assert_eq!(
        admin.get(&format!("{ep_path}/secret")).await["key"],
        supplied
    );

    let both = admin
        .post(
            &endpoints,
            json!({"url": "http://127.0.0.1:9/both", "signatureSchemes": ["v1", "v1a"]}),
            201,
        )
        .await;
    let both_path = format!("{endpoints}/{}", both["id"].as_str().unwrap());
    let generated = admin.get(&format!("{both_path}/secret")).await["key"]
        .as_str()
        .unwrap()
        .to_owned();
    secrets.key("a generated endpoint secret", &generated);
    let ed25519 = Ed25519SecretKey::generate().to_string();
    secrets.key("a supplied ed25519 key", &ed25519);
    admin
        .post(
            &format!("{both_path}/secret/rotate"),
            json!({"key": ed25519}),
            200,
        )
        .await;

    let rotated_in = Secret::generate().to_string();
    secrets.key("a secret given to rotate", &rotated_in);
    let answer = admin
        .post(
            &format!("{ep_path}/secret/rotate"),
            json!({"key": rotated_in}),
            200,
        )
        .await;
    assert_eq!(answer["key"], rotated_in);
    let answer = admin
        .post(&format!("{ep_path}/secret/rotate"), json!({}), 200)
        .await;
    secrets.key("a secret rotate made", answer["key"].as_str().unwrap());

    let upserted_secret = Secret::generate().to_string();
    secrets.key("a secret given to PUT", &upserted_secret);
    let upsert_credential = format!("Basic {}", credential("upsert"));
    secrets.text("header Authorization (PUT endpoint)", &upsert_credential);
    admin
        .put(
            &format!("{endpoints}/by-uid"),
            json!({"url": "http://127.0.0.1:9/uid", "secret": upserted_secret,
                   "headers": {"Authorization": upsert_credential}}),
            201,
        )
        .await;

    admin
        .post(
            &format!("/app/{app}/msg"),
            json!({"eventType": "order.paid", "payload": {}}),
            202,
        )
        .await;
    receiver.wait_for(1).await;
    let delivered = &receiver.requests()[0];
    for (name, value) in &credentials {
        assert_eq!(delivered.header(name), value, "{name} is sent as given");
    }
    assert_eq!(delivered.header("X-Tenant"), canary);

    let put_credential = credential("put-headers");
    let cookie = format!("session={}", credential("cookie"));
    secrets.text("header Authorization (PUT headers)", &put_credential);
    secrets.text("header Cookie (PATCH headers)", &cookie);
    let both_headers = format!("{both_path}/headers");
    admin
        .put(
            &both_headers,
            json!({"headers": {"Authorization": put_credential, "X-Plain": "1"}}),
            204,
        )
        .await;
    admin
        .patch(&both_headers, json!({"headers": {"Cookie": cookie}}))
        .await;

    // Destinations: an AWS secret key, a broker URI's password, a poller token, a fifo
    // destination's secret and credential header.
    let destinations = format!("/app/{app}/destination");
    let aws_secret = credential("aws");
    secrets.text("a destination's secretAccessKey", &aws_secret);
    let sqs = json!({"type": "sqs", "config": {"queueUrl": "http://127.0.0.1:9/1/q",
                     "accessKeyId": "AKIDEXAMPLE", "secretAccessKey": aws_secret}});
    admin.post(&destinations, sqs, 201).await;
    let amqp_password = credential("amqp");
    secrets.text("a rabbitMq URI's password", &amqp_password);
    let uri = format!("amqp://guest:{amqp_password}@127.0.0.1:5672/%2f");
    let rabbit = json!({"type": "rabbitMq", "config": {"uri": uri, "routingKey": "k"}});
    admin.post(&destinations, rabbit, 201).await;
    let fifo_credential = format!("Bearer {}", credential("fifo"));
    secrets.text("a fifoEndpoint's Authorization header", &fifo_credential);
    let fifo = json!({"uid": "fifo", "type": "fifoEndpoint",
                      "config": {"url": "http://127.0.0.1:9/fifo",
                                 "headers": {"Authorization": fifo_credential}}});
    admin.post(&destinations, fifo, 201).await;
    let fifo_secret = admin.get(&format!("{destinations}/fifo/secret")).await["key"]
        .as_str()
        .unwrap()
        .to_owned();
    secrets.key("a fifoEndpoint's secret", &fifo_secret);
    let polling = json!({"uid": "poller", "type": "pollingEndpoint", "config": {}});
    admin.post(&destinations, polling, 201).await;
    let rotate = format!("/auth/app/{app}/destination/poller/poller/token/rotate");
    let poller_token = admin.post(&rotate, json!({}), 200).await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    secrets.text("a poller token", &poller_token);

    let made = Made {
        secrets,
        canary,
        app,
        headers_path: format!("{ep_path}/headers"),
        app_token,
        read_only_token,
        portal_token,
        credentials,
    };
    (hookd, made)
}

/// Fails naming every secret found in the files at `paths` (`stage` says when), or if none
/// of them holds `canary`.
fn assert_files_hold_no_secret(made: &Made, paths: &[PathBuf], stage: &str) {
    let mut found = Vec::new();
    let mut canary_seen = false;
    for path in paths {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        canary_seen |= memchr::memmem::find(&bytes, made.canary.as_bytes()).is_some();
        found.extend(made.secrets.found_in(&path.display().to_string(), &bytes));
    }
    assert!(
        canary_seen,
        "{stage}: the clear canary is in none of {paths:?}"
    );
    assert!(
        found.is_empty(),
        "{stage}: secrets in clear:\n{}",
        found.join("\n")
    );
}

fn sqlite_files(database: &Path) -> Vec<PathBuf> {
    let name = database.file_name().unwrap().to_str().unwrap();
    ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| database.with_file_name(format!("{name}{suffix}")))
        .collect()
}

#[tokio::test]
async fn sqlite_files_wal_included_hold_no_secret_in_clear() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    let database = PathBuf::from(url.strip_prefix("sqlite://").unwrap());
    let (hookd, made) = make_every_secret(&url).await;
    let files = sqlite_files(&database);
    assert!(files[1].exists(), "hookd runs SQLite in WAL mode");
    assert_files_hold_no_secret(&made, &files, "while hookd runs");

    let db = rusqlite::Connection::open(&database).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    let (busy, _, _): (i64, i64, i64) = db
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!(busy, 0, "the checkpoint ran");
    drop(db);
    assert_files_hold_no_secret(&made, &files, "after a checkpoint");

    drop(hookd);
    assert_files_hold_no_secret(&made, &files, "after hookd stopped");
    println!("{} secrets searched for", made.secrets.len());
}

#[tokio::test]
async fn postgres_tables_and_files_hold_no_secret_in_clear() {
    let started = SystemTime::now();
    let test = "secrets_at_rest::postgres";
    let Some((url, _db)) = hookd_store::testing::fresh_postgres(test).await else {
        return;
    };
    let (_hookd, made) = make_every_secret(&url).await;
    let mut pg = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();

    let tables: Vec<String> =
        sqlx::query_scalar("SELECT tablename::text FROM pg_tables WHERE schemaname = 'hookd'")
            .fetch_all(&mut pg)
            .await
            .unwrap();
    assert!(tables.len() > 10, "hookd's tables: {tables:?}");
    let (mut found, mut canary_seen) = (Vec::new(), false);
    for table in &tables {
        let sql = format!(r#"SELECT t::text FROM hookd."{table}" t"#);
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_all(&mut pg)
            .await
            .unwrap();
        let text = rows.join("\n");
        canary_seen |= text.contains(&made.canary);
        found.extend(made.secrets.found_in(table, text.as_bytes()));
    }
    assert!(canary_seen, "the clear canary is in no table");
    assert!(
        found.is_empty(),
        "secrets in clear in tables:\n{}",
        found.join("\n")
    );

    sqlx::query("CHECKPOINT").execute(&mut pg).await.unwrap();
    let data_dir: String = sqlx::query_scalar("SHOW data_directory")
        .fetch_one(&mut pg)
        .await
        .unwrap();
    let oid: String =
        sqlx::query_scalar("SELECT oid::text FROM pg_database WHERE datname = current_database()")
            .fetch_one(&mut pg)
            .await
            .unwrap();
    let base = Path::new(&data_dir).join("base").join(&oid);
    let Ok(entries) = std::fs::read_dir(&base) else {
        println!(
            "SKIPPED {test} file scan: {} is not readable here",
            base.display()
        );
        return;
    };
    let relations: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    assert_files_hold_no_secret(&made, &relations, "the database's files");
    let written_since = |path: &PathBuf| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .is_ok_and(|at| at >= started)
    };
    let wal: Vec<PathBuf> = std::fs::read_dir(Path::new(&data_dir).join("pg_wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && written_since(p))
        .collect();
    assert_files_hold_no_secret(&made, &wal, "the WAL written during the test");
    println!(
        "{} secrets searched for in {} tables, {} relation files, {} WAL segments",
        made.secrets.len(),
        tables.len(),
        relations.len(),
        wal.len()
    );
}

/// An admin token sees credential header values; an app token, a read-only admin token and a
/// portal token see only their names, in `sensitive`.
#[tokio::test]
async fn credential_headers_are_shown_to_customers_by_name_only() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    let (hookd, made) = make_every_secret(&url).await;
    let first = first_start_token(&hookd);
    let mut names: Vec<&str> = made.credentials.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();

    let full = Client::new(&hookd, &first).get(&made.headers_path).await;
    for (name, value) in &made.credentials {
        assert_eq!(full["headers"][name], json!(value), "{full}");
    }
    assert_eq!(full["headers"]["X-Tenant"], json!(made.canary));
    assert_eq!(full["sensitive"], json!([]), "{full}");

    for token in [&made.app_token, &made.read_only_token, &made.portal_token] {
        let shown = Client::new(&hookd, token).get(&made.headers_path).await;
        assert_eq!(
            shown["headers"],
            json!({"X-Tenant": made.canary}),
            "{shown}"
        );
        assert_eq!(shown["sensitive"], json!(names), "{shown}");
        let text = shown.to_string();
        for (_, value) in &made.credentials {
            assert!(!text.contains(value.as_str()), "{text}");
        }
    }
    let listed = Client::new(&hookd, &made.app_token)
        .get(&format!("/app/{}/endpoint", made.app))
        .await
        .to_string();
    for (_, value) in &made.credentials {
        assert!(!listed.contains(value.as_str()), "{listed}");
    }
}

/// Credential headers an older hookd kept in clear, and headers of a name the operator adds
/// with `--sensitive-header` later, are sealed by the next start, and still sent.
#[tokio::test]
async fn credential_headers_kept_in_clear_are_sealed_at_the_next_start() {
    let (url, dir) = hookd_store::testing::fresh_sqlite();
    let receiver = Receiver::always(axum::http::StatusCode::NO_CONTENT).await;
    let token = "at-rest-admin-token";
    let first = Hookd::serve_local(&url, token, &[]);
    let admin = Client::new(&first, token);
    let app = admin.post("/app", json!({"name": "old"}), 201).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ep = admin
        .post(
            &format!("/app/{app}/endpoint"),
            json!({"url": receiver.url}),
            201,
        )
        .await;
    let ep_id = ep["id"].as_str().unwrap().to_owned();
    drop(first);

    let (bearer, pass) = (credential("bearer"), credential("pass"));
    let older = json!({"Authorization": bearer, OPERATOR_HEADER: pass, "X-Tenant": "7"});
    let db = rusqlite::Connection::open(dir.path().join("hookd.db")).unwrap();
    let stored_headers = || -> String {
        db.query_row(
            "SELECT headers FROM endpoints WHERE id = ?1",
            [&ep_id],
            |r| r.get(0),
        )
        .unwrap()
    };
    db.execute(
        "UPDATE endpoints SET headers = ?1 WHERE id = ?2",
        [older.to_string(), ep_id.clone()],
    )
    .unwrap();

    let second = Hookd::serve_local(&url, token, &["--sensitive-header", OPERATOR_HEADER]);
    assert_eq!(
        stored_headers(),
        r#"{"X-Tenant":"7"}"#,
        "only X-Tenant stays in clear"
    );
    let admin = Client::new(&second, token);
    let shown = admin
        .get(&format!("/app/{app}/endpoint/{ep_id}/headers"))
        .await;
    assert_eq!(shown["headers"], older, "{shown}");
    admin
        .post(
            &format!("/app/{app}/msg"),
            json!({"eventType": "a.b", "payload": {}}),
            202,
        )
        .await;
    receiver.wait_for(1).await;
    let delivered = &receiver.requests()[0];
    assert_eq!(delivered.header("Authorization"), bearer);
    assert_eq!(delivered.header(OPERATOR_HEADER), pass);
    assert_eq!(delivered.header("X-Tenant"), "7");
}
