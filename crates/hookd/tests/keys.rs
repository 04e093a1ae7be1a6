//! The real `hookd` binary's keys and access: production mode refusing to start without a
//! master key, the key file made on first start, rotating the master key with a command
//! (ingest sources' secrets re-sealed too), refusing a database sealed under a key it was not
//! given, a PostgreSQL dump that holds no secret, tokens from the command line, and the
//! `hookd::audit` log lines.

mod support;

use std::process::{Command, Stdio};

use support::{Api, Hookd, TEST_MASTER_KEY};

const TOKEN: &str = "keys-admin-token";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn run_hookd(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hookd"))
        .args(args)
        .env_remove("HOOKD_MASTER_KEY")
        .env_remove("HOOKD_MASTER_KEY_FILE")
        .output()
        .expect("run hookd")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An endpoint with [`SECRET`] in a new application; returns the secret path.
async fn endpoint_with_secret(api: &Api) -> String {
    let app = api.app_with_endpoint("http://127.0.0.1:9/first").await;
    let (status, ep) = api
        .post(
            &format!("/app/{app}/endpoint"),
            serde_json::json!({"url": "http://127.0.0.1:9/hook", "secret": SECRET}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{ep}");
    format!("/app/{app}/endpoint/{}/secret", ep["id"].as_str().unwrap())
}

#[test]
fn production_mode_refuses_to_start_without_a_master_key_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("hookd.db").display());
    let output = run_hookd(&[
        "serve",
        "--production",
        "--listen",
        "127.0.0.1:0",
        "--database",
        &database,
        "--admin-token",
        TOKEN,
    ]);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("refusing to start in production mode without a master key")
            && stderr.contains("--master-key-file"),
        "{stderr}"
    );
    assert!(!dir.path().join("master.key").exists());
}

#[tokio::test]
async fn the_master_key_file_is_made_on_first_start_rotated_by_command_and_required_after() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap().to_owned();
    let args = [
        "--data-dir",
        &data_dir,
        "--admin-token",
        TOKEN,
        "--allow-http-endpoints",
    ];
    let no_env_key = [("HOOKD_MASTER_KEY", "")];
    let hookd_1 = Hookd::serve_with(&args, &no_env_key, Stdio::null());
    let key_file = dir.path().join("master.key");
    let first = std::fs::read_to_string(&key_file).expect("the key file was made");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "readable by its owner only");
    }
    let api = Api::new(&hookd_1, TOKEN);
    let secret_path = endpoint_with_secret(&api).await;
    let ingest = api.at_root();
    let source = serde_json::json!({"name": "s", "type": "svix", "config": {"secret": SECRET}});
    let (status, source) = ingest
        .call(
            reqwest::Method::POST,
            "/ingest/api/v1/source",
            Some(source),
            &[],
        )
        .await;
    assert_eq!(status, 201, "{source}");
    drop(hookd_1);

    let rotated = run_hookd(&["master-key", "rotate", "--data-dir", &data_dir]);
    assert!(rotated.status.success(), "{}", text(&rotated.stderr));
    assert!(text(&rotated.stdout).contains("2 endpoint(s) re-sealed under it, and 1 ingest"));
    let second = std::fs::read_to_string(&key_file).unwrap();
    let keys = |file: &str| {
        file.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&second).len(), 2);
    assert_eq!(
        keys(&second)[1],
        keys(&first)[0],
        "the old key is kept behind"
    );

    let dropped = run_hookd(&[
        "master-key",
        "rotate",
        "--drop-old",
        "--data-dir",
        &data_dir,
    ]);
    assert!(dropped.status.success(), "{}", text(&dropped.stderr));
    assert_eq!(keys(&std::fs::read_to_string(&key_file).unwrap()).len(), 1);

    let hookd_2 = Hookd::serve_with(&args, &no_env_key, Stdio::null());
    let secret = Api::new(&hookd_2, TOKEN).get(&secret_path).await;
    assert_eq!(secret["key"], SECRET, "the secret survives two master keys");
    let path = format!("/ingest/api/v1/source/{}", source["id"].as_str().unwrap());
    let (status, read) = Api::new(&hookd_2, TOKEN)
        .at_root()
        .call(reqwest::Method::GET, &path, None, &[])
        .await;
    assert_eq!(status, 200, "the source survives them too: {read}");
    let token = |source: &serde_json::Value| {
        let url = source["ingestUrl"].as_str().unwrap().to_owned();
        url.split("/ingest/in/").nth(1).unwrap().to_owned()
    };
    assert_eq!(token(&read), token(&source), "its token too");
    drop(hookd_2);

    let stranger = run_hookd(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &data_dir,
        "--master-key",
        TEST_MASTER_KEY,
    ]);
    assert!(!stranger.status.success());
    let stderr = text(&stranger.stderr);
    assert!(
        stderr.contains("which this hookd was not given"),
        "a wrong key is refused at start: {stderr}"
    );
}

#[tokio::test]
async fn a_plaintext_secret_left_by_schema_v1_is_sealed_at_the_next_start() {
    let (url, dir) = hookd_store::testing::fresh_sqlite();
    let hookd_1 = Hookd::serve_local(&url, TOKEN, &[]);
    let secret_path = endpoint_with_secret(&Api::new(&hookd_1, TOKEN)).await;
    drop(hookd_1);
    let db = rusqlite::Connection::open(dir.path().join("hookd.db")).unwrap();
    let legacy = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    let endpoint_id = secret_path.split('/').nth(4).unwrap();
    db.execute(
        "UPDATE endpoints SET secret = ?1 WHERE id = ?2",
        [legacy, endpoint_id],
    )
    .unwrap();

    let hookd_2 = Hookd::serve_local(&url, TOKEN, &[]);
    let secret = Api::new(&hookd_2, TOKEN).get(&secret_path).await;
    assert_eq!(secret["key"], legacy, "the old secret still signs");
    let stored: String = db
        .query_row(
            "SELECT secret FROM endpoints WHERE id = ?1",
            [endpoint_id],
            |row| row.get(0),
        )
        .unwrap();
    assert!(stored.starts_with("hk1:"), "sealed at start: {stored}");
}

#[tokio::test]
async fn a_postgres_dump_holds_no_secret() {
    let Some((url, _db)) =
        hookd_store::testing::fresh_postgres("a_postgres_dump_holds_no_secret").await
    else {
        return;
    };
    let hookd = Hookd::serve_local(&url, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let secret_path = endpoint_with_secret(&api).await;
    assert_eq!(api.get(&secret_path).await["key"], SECRET);
    let dump = Command::new("pg_dump")
        .args(["--data-only", "--schema", "hookd", &url])
        .output()
        .expect("run pg_dump");
    assert!(dump.status.success(), "{}", text(&dump.stderr));
    let dump = text(&dump.stdout);
    assert!(dump.contains("hk1:"), "the sealed keys are in the dump");
    let body = SECRET.strip_prefix("whsec_").unwrap();
    assert!(!dump.contains(body) && !dump.contains("whsec_") && !dump.contains("whsk_"));
}

#[tokio::test]
async fn tokens_made_on_the_command_line_work_and_revoking_one_stops_it() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(&url, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint("http://127.0.0.1:9/hook").await;
    let cli = |args: &[&str]| {
        let mut all = vec!["token"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--database", &url]);
        let output = run_hookd(&all);
        assert!(output.status.success(), "{}", text(&output.stderr));
        (text(&output.stdout), text(&output.stderr))
    };
    let (scoped, note) = cli(&[
        "create",
        "--app",
        &app,
        "--name",
        "billing",
        "--expires-in",
        "1d",
    ]);
    let scoped = scoped.trim().to_owned();
    let id = note.split_whitespace().nth(1).unwrap().to_owned();
    assert!(id.starts_with("tok_"), "{note}");
    let customer = Api::new(&hookd, &scoped);
    customer.get(&format!("/app/{app}/endpoint")).await;
    let (status, _) = customer
        .post("/app", serde_json::json!({"name": "x"}))
        .await
        .unwrap();
    assert_eq!(status, 403, "scoped to its application");

    let (spare, note) = cli(&["create", "--name", "spare admin"]);
    let spare_id = note.split_whitespace().nth(1).unwrap().to_owned();
    let (listed, _) = cli(&["list"]);
    assert!(listed.contains(&id) && listed.contains("billing") && listed.contains(&app));
    cli(&["revoke", &spare_id]);
    let (status, _) = Api::new(&hookd, spare.trim())
        .post("/app", serde_json::json!({"name": "x"}))
        .await
        .unwrap();
    assert_eq!(status, 401, "a revoked token is refused");
    let (listed, _) = cli(&["list"]);
    let line = listed.lines().find(|l| l.starts_with(&spare_id)).unwrap();
    assert!(!line.ends_with("\t-"), "listed with its revocation: {line}");
}

#[tokio::test]
async fn token_use_secret_reads_and_rotations_leave_audit_lines() {
    let (url, dir) = hookd_store::testing::fresh_sqlite();
    let log_path = dir.path().join("stderr.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let args = [
        "--database",
        url.as_str(),
        "--admin-token",
        TOKEN,
        "--allow-http-endpoints",
    ];
    let hookd = Hookd::serve_with(
        &args,
        &[
            ("HOOKD_LOG", "warn,hookd::audit=info"),
            ("HOOKD_LOG_JSON", "true"),
        ],
        Stdio::from(log),
    );
    let api = Api::new(&hookd, TOKEN);
    let secret_path = endpoint_with_secret(&api).await;
    api.get(&secret_path).await;
    // Reads and publishes are too many for the audit trail (`--access-log` adds them).
    let app_path = secret_path.split("/endpoint/").next().unwrap();
    api.get(&format!("{app_path}/endpoint")).await;
    let (status, _) = api
        .post(
            &format!("{app_path}/msg"),
            serde_json::json!({"eventType": "a", "payload": {}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 202);
    let (status, _) = api
        .post(&format!("{secret_path}/rotate"), serde_json::json!({}))
        .await
        .unwrap();
    assert_eq!(status, 200);
    drop(hookd);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|l: &serde_json::Value| l["target"] == "hookd::audit")
        .collect();
    let action = |name: &str| {
        lines
            .iter()
            .find(|l| l["fields"]["action"] == name)
            .unwrap_or_else(|| panic!("no {name} line in {lines:?}"))
            .clone()
    };
    let used = action("token.use");
    assert_eq!(used["fields"]["token_id"], "configured");
    assert!(used["fields"]["status"].is_number());
    let requests: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| l["fields"]["action"] == "token.use")
        .map(|l| {
            let fields = &l["fields"];
            (
                fields["method"].as_str().unwrap(),
                fields["path"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(
        requests
            .iter()
            .all(|(method, path)| *method == "POST" && !path.ends_with("/msg")),
        "only the changes leave token.use lines: {requests:?}"
    );
    assert!(
        requests.len() >= 3,
        "the app, the endpoints, the rotation: {requests:?}"
    );
    let read = action("secret.read");
    assert!(
        read["fields"]["endpoint_id"]
            .as_str()
            .unwrap()
            .starts_with("ep_")
    );
    let rotated = action("secret.rotate");
    assert_eq!(rotated["fields"]["overlap_secs"], 86_400);
    let all = serde_json::to_string(&lines).unwrap();
    assert!(!all.contains("whsec_"), "no secret in the audit log");
}
