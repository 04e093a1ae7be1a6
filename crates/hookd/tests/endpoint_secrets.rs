//! Promises about endpoint secrets, on the real binary and both databases:
//! - a key the caller supplies that another endpoint (of any application) holds is refused
//!   with 422 naming the field (`secret` on create, `key` on rotate, `config.key` for a
//!   destination); generated keys are never refused, and a deleted endpoint's key is free;
//! - endpoints written before key digests existed get them at start;
//! - with `--secrets-shown-once`, `GET …/secret` answers a secret once after it is made, a
//!   second read is refused with 409 saying to rotate, and a rotation makes a new secret
//!   readable once.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use support::{Api, Hookd};

const TOKEN: &str = "endpoint-secrets-test-admin-token";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

async fn app(api: &Api) -> String {
    let (status, app) = api.post("/app", json!({"name": "secrets"})).await.unwrap();
    assert_eq!(status, 201, "{app}");
    app["id"].as_str().unwrap().to_owned()
}

/// Creates an endpoint of `app` with `body` added to its URL: the status and answer.
async fn create(api: &Api, app: &str, body: Value) -> (u16, Value) {
    let mut endpoint = json!({"url": "https://hooks.example.com/in"});
    endpoint
        .as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    api.post(&format!("/app/{app}/endpoint"), endpoint)
        .await
        .unwrap()
}

async fn secret(api: &Api, app: &str, ep: &str) -> (u16, Value) {
    let path = format!("/app/{app}/endpoint/{ep}/secret");
    api.call(Method::GET, &path, None, &[]).await
}

/// Asserts a 422 whose detail names the body field `field`.
fn assert_refused_field(answer: &(u16, Value), field: &[&str]) {
    let (status, body) = answer;
    assert_eq!(*status, 422, "{body}");
    let mut location = vec!["body"];
    location.extend_from_slice(field);
    assert_eq!(body["detail"][0]["loc"], json!(location), "{body}");
    let message = body["detail"][0]["msg"].as_str().unwrap();
    assert!(
        message.contains("already used by another endpoint"),
        "{message}"
    );
}

async fn a_supplied_key_another_endpoint_holds_is_refused(database: &str) {
    let hookd = Hookd::serve(&["--database", database, "--admin-token", TOKEN]);
    let api = Api::new(&hookd, TOKEN);
    let (first_app, second_app) = (app(&api).await, app(&api).await);
    let (status, first) = create(&api, &first_app, json!({"secret": SECRET})).await;
    assert_eq!(status, 201, "{first}");

    // Another application, the same application, and a PUT that creates: all refused.
    assert_refused_field(
        &create(&api, &second_app, json!({"secret": SECRET})).await,
        &["secret"],
    );
    assert_refused_field(
        &create(&api, &first_app, json!({"secret": SECRET})).await,
        &["secret"],
    );
    let put = json!({"url": "https://hooks.example.com/in", "secret": SECRET});
    let path = format!("/app/{second_app}/endpoint/by-uid");
    let answer = api.call(Method::PUT, &path, Some(put), &[]).await;
    assert_refused_field(&answer, &["secret"]);

    // A generated secret is never refused, and is itself protected once made.
    let (status, generated) = create(&api, &second_app, json!({})).await;
    assert_eq!(status, 201, "{generated}");
    let generated_id = generated["id"].as_str().unwrap();
    let (_, shown) = secret(&api, &second_app, generated_id).await;
    let generated_key = shown["key"].as_str().unwrap().to_owned();
    assert_refused_field(
        &create(&api, &first_app, json!({"secret": generated_key})).await,
        &["secret"],
    );

    // Rotating to a key another endpoint holds is refused; to a fresh one, accepted.
    let rotate = format!("/app/{second_app}/endpoint/{generated_id}/secret/rotate");
    let answer = api.post(&rotate, json!({"key": SECRET})).await.unwrap();
    assert_refused_field(&answer, &["key"]);
    let (status, rotated) = api.post(&rotate, json!({"key": OTHER})).await.unwrap();
    assert!(status < 300, "{status} {rotated}");
    // The key it rotated away from still signs during the overlap: still its own.
    assert_refused_field(
        &create(&api, &first_app, json!({"secret": generated_key})).await,
        &["secret"],
    );
    assert_refused_field(
        &create(&api, &first_app, json!({"secret": OTHER})).await,
        &["secret"],
    );

    // A destination's supplied key too.
    let config = json!({"url": "https://hooks.example.com/fifo", "key": SECRET});
    let destination = json!({"type": "fifoEndpoint", "config": config});
    let path = format!("/app/{second_app}/destination");
    let answer = api.post(&path, destination).await.unwrap();
    assert_refused_field(&answer, &["config", "key"]);

    // Once the endpoint holding it is deleted, the key is free.
    let first_id = first["id"].as_str().unwrap();
    let path = format!("/app/{first_app}/endpoint/{first_id}");
    let (status, _) = api.call(Method::DELETE, &path, None, &[]).await;
    assert_eq!(status, 204);
    let (status, answer) = create(&api, &second_app, json!({"secret": SECRET})).await;
    assert_eq!(status, 201, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reused_keys_are_refused_on_sqlite() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    a_supplied_key_another_endpoint_holds_is_refused(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reused_keys_are_refused_on_postgres() {
    let Some((url, _db)) =
        hookd_store::testing::fresh_postgres("reused_keys_are_refused_on_postgres").await
    else {
        return;
    };
    a_supplied_key_another_endpoint_holds_is_refused(&url).await;
}

/// Endpoints whose digests are missing (as written by a hookd before them) get them at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_without_digests_get_them_at_start() {
    let (url, dir) = hookd_store::testing::fresh_sqlite();
    let mut hookd = Hookd::serve(&["--database", &url, "--admin-token", TOKEN]);
    let api = Api::new(&hookd, TOKEN);
    let app = app(&api).await;
    let (status, answer) = create(&api, &app, json!({"secret": SECRET})).await;
    assert_eq!(status, 201, "{answer}");
    hookd.kill_hard();
    let file = url.strip_prefix("sqlite://").unwrap();
    let connection = rusqlite::Connection::open(file).unwrap();
    let removed = connection
        .execute("DELETE FROM endpoint_key_digests", [])
        .unwrap();
    assert!(removed >= 1);
    drop(connection);

    let hookd = Hookd::serve(&["--database", &url, "--admin-token", TOKEN]);
    let api = Api::new(&hookd, TOKEN);
    assert_refused_field(
        &create(&api, &app, json!({"secret": SECRET})).await,
        &["secret"],
    );
    drop(dir);
}

async fn with_secrets_shown_once_a_second_read_is_refused(database: &str) {
    let hookd = Hookd::serve(&[
        "--database",
        database,
        "--admin-token",
        TOKEN,
        "--secrets-shown-once",
    ]);
    let api = Api::new(&hookd, TOKEN);
    let app = app(&api).await;
    let (status, ep) = create(&api, &app, json!({})).await;
    assert_eq!(status, 201, "{ep}");
    let ep = ep["id"].as_str().unwrap();

    let (status, first) = secret(&api, &app, ep).await;
    assert_eq!(status, 200, "{first}");
    let first_key = first["key"].as_str().unwrap().to_owned();
    assert!(first_key.starts_with("whsec_"));
    let (status, refused) = secret(&api, &app, ep).await;
    assert_eq!(status, 409, "{refused}");
    let detail = refused["detail"].as_str().unwrap();
    assert!(
        detail.contains("shown once") && detail.contains("rotate"),
        "{detail}"
    );

    // Rotation makes a new secret, readable once.
    let rotate = format!("/app/{app}/endpoint/{ep}/secret/rotate");
    let (status, rotated) = api.post(&rotate, json!({})).await.unwrap();
    assert!(status < 300, "{status} {rotated}");
    let (status, second) = secret(&api, &app, ep).await;
    assert_eq!(status, 200, "{second}");
    assert_ne!(second["key"], json!(first_key));
    let (status, refused) = secret(&api, &app, ep).await;
    assert_eq!(status, 409, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_shown_once_on_sqlite() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    with_secrets_shown_once_a_second_read_is_refused(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_shown_once_on_postgres() {
    let Some((url, _db)) =
        hookd_store::testing::fresh_postgres("secrets_shown_once_on_postgres").await
    else {
        return;
    };
    with_secrets_shown_once_a_second_read_is_refused(&url).await;
}

/// Without the setting (Svix's behaviour), a secret reads the same every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_secret_reads_any_number_of_times() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve(&["--database", &url, "--admin-token", TOKEN]);
    let api = Api::new(&hookd, TOKEN);
    let app = app(&api).await;
    let (_, ep) = create(&api, &app, json!({"secret": SECRET})).await;
    let ep = ep["id"].as_str().unwrap();
    for _ in 0..3 {
        let (status, shown) = secret(&api, &app, ep).await;
        assert_eq!(status, 200, "{shown}");
        assert_eq!(shown["key"], SECRET);
    }
}
