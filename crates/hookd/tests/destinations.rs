//! The real `hookd` binary's destination routes: destinations made, read, listed, replaced,
//! patched and deleted in Svix's shape; their credentials never shown back; a type hookd does
//! not serve, or a bad config field, refused with 422 naming it; destinations counted with
//! endpoints against `--max-endpoints-per-app`; and the endpoint routes and the destination
//! routes each seeing only their own. A polling destination's poller and consumers, on both
//! databases; and the official Svix SDKs (Python and JavaScript), code we did not write,
//! driving all of it, every polled message verified with the reference `standardwebhooks`.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use support::{Api, Hookd, TestTime, process, python, run_python_script};

const TOKEN: &str = "destinations-admin-token";

async fn app(api: &Api) -> String {
    let (status, app) = api.post("/app", json!({"name": "shop"})).await.unwrap();
    assert_eq!(status, 201, "{app}");
    app["id"].as_str().unwrap().to_owned()
}

/// Makes the destination `body` (whose uid is `uid`) in `app`; answers its signing secret.
async fn made_with_secret(api: &Api, app: &str, uid: &str, body: Value) -> String {
    let (status, made) = api
        .post(&format!("/app/{app}/destination"), body)
        .await
        .unwrap();
    assert_eq!(status, 201, "{made}");
    let secret = api
        .get(&format!("/app/{app}/destination/{uid}/secret"))
        .await;
    secret["key"].as_str().unwrap().to_owned()
}

/// The 422's failing field, as `body.config.queueUrl`.
fn refused_field(answer: &Value) -> String {
    let loc = answer["detail"][0]["loc"]
        .as_array()
        .expect("a validation error");
    loc.iter()
        .map(|part| part.as_str().unwrap())
        .collect::<Vec<_>>()
        .join(".")
}

#[tokio::test]
async fn destinations_round_trip_in_svix_shape_without_their_credentials() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(&url, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let app = app(&api).await;
    let path = format!("/app/{app}/destination");

    let rabbit = json!({
        "uid": "rabbit",
        "type": "rabbitMq",
        "config": {"uri": "amqp://guest:hunter2@127.0.0.1:5672/%2f", "routingKey": "orders"},
        "batchSize": 1,
        "eventTypes": ["order.paid"],
        "metadata": {"team": "billing"},
    });
    let (status, created) = api.post(&path, rabbit).await.unwrap();
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["type"], "rabbitMq");
    assert_eq!(created["uid"], "rabbit");
    assert_eq!(created["status"], "enabled");
    assert_eq!(created["batchSize"], 1);
    assert_eq!(created["maxWaitSecs"], 0);
    assert_eq!(created["eventTypes"], json!(["order.paid"]));
    assert_eq!(created["metadata"], json!({"team": "billing"}));
    assert!(created["currentIterator"].is_string());
    assert_eq!(created["config"]["routingKey"], "orders");
    assert_eq!(created["config"]["mandatory"], false);
    let uri = created["config"]["uri"].as_str().unwrap();
    assert!(
        uri.starts_with("amqp://guest:") && !uri.contains("hunter2"),
        "{uri}"
    );

    let sqs = json!({
        "type": "sqs",
        "config": {"queueUrl": "http://127.0.0.1:5000/123456789012/q", "accessKeyId": "AK",
                   "secretAccessKey": "very-secret"},
    });
    let (status, queue) = api.post(&path, sqs).await.unwrap();
    assert_eq!(status, 201, "{queue}");
    assert_eq!(queue["config"]["region"], "us-east-1");
    assert_eq!(queue["config"]["accessKeyId"], "AK");
    let queue_id = queue["id"].as_str().unwrap();
    let (status, polling) = api
        .post(&path, json!({"type": "pollingEndpoint", "config": {}}))
        .await
        .unwrap();
    assert_eq!(status, 201, "{polling}");
    assert_eq!(polling["config"], json!({}));

    let listed = api.get(&path).await;
    let types: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["rabbitMq", "sqs", "pollingEndpoint"]);
    let kafka = json!({"type": "kafka",
                       "config": {"bootstrapServers": ["127.0.0.1:9092"], "topic": "orders"}});
    let (status, stream) = api.post(&path, kafka).await.unwrap();
    assert_eq!(status, 201, "{stream}");
    let svix_types = api.get(&path).await["data"].as_array().unwrap().len();
    assert_eq!(
        svix_types, 3,
        "the SDKs' lists hold only the types they know"
    );
    let extended = api.get(&format!("{path}?extended=true")).await;
    assert_eq!(extended["data"][3]["type"], "kafka");
    assert!(listed["iterator"].is_string() || listed["iterator"].is_null());
    let everything = listed.to_string();
    assert!(!everything.contains("hunter2") && !everything.contains("very-secret"));

    // PATCH lays the config's fields over the stored ones; the sealed secret stays.
    let (status, patched) = api
        .call(
            Method::PATCH,
            &format!("{path}/{queue_id}"),
            Some(json!({"type": "sqs", "config": {"region": "eu-west-1"}, "status": "disabled"})),
            &[],
        )
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["config"]["region"], "eu-west-1");
    assert_eq!(patched["config"]["accessKeyId"], "AK");
    assert_eq!(patched["status"], "disabled");
    let (status, wrong) = api
        .call(
            Method::PATCH,
            &format!("{path}/{queue_id}"),
            Some(json!({"type": "sns", "config": {}})),
            &[],
        )
        .await;
    assert_eq!((status, refused_field(&wrong)), (422, "body.type".into()));

    // PUT replaces a destination, and creates one under a new uid.
    let (status, replaced) = api
        .call(
            Method::PUT,
            &format!("{path}/rabbit"),
            Some(json!({"type": "rabbitMq",
                        "config": {"uri": "amqp://127.0.0.1:5672/%2f", "routingKey": "k2",
                                   "mandatory": true}})),
            &[],
        )
        .await;
    assert_eq!(status, 200, "{replaced}");
    assert_eq!(replaced["config"]["uri"], "amqp://127.0.0.1:5672/%2f");
    assert_eq!(replaced["config"]["mandatory"], true);
    assert_eq!(replaced["uid"], Value::Null, "PUT replaces every field");
    let (status, made) = api
        .call(
            Method::PUT,
            &format!("{path}/poller-2"),
            Some(json!({"type": "pollingEndpoint", "config": {}})),
            &[],
        )
        .await;
    assert_eq!((status, made["uid"].as_str()), (201, Some("poller-2")));

    let (status, _) = api
        .call(Method::DELETE, &format!("{path}/{queue_id}"), None, &[])
        .await;
    assert_eq!(status, 204);
    let (status, _) = api
        .call(Method::GET, &format!("{path}/{queue_id}"), None, &[])
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn an_unserved_type_or_a_bad_config_field_is_refused_by_its_name() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(&url, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let app = app(&api).await;
    let path = format!("/app/{app}/destination");
    let refused = async |body: Value| {
        let (status, answer) = api.post(&path, body).await.unwrap();
        assert_eq!(status, 422, "{answer}");
        (refused_field(&answer), answer.to_string())
    };
    let (field, answer) = refused(json!({"type": "bigQuery", "config": {}})).await;
    assert_eq!(field, "body.type");
    assert!(
        answer.contains("bigQuery") && answer.contains("pollingEndpoint"),
        "{answer}"
    );
    let cases = [
        (
            json!({"type": "sqs", "config": {"queueUrl": "not a url"}}),
            "body.config.queueUrl",
        ),
        (
            json!({"type": "rabbitMq", "config": {"uri": "amqp://h/"}}),
            "body.config.routingKey",
        ),
        (
            json!({"type": "fifoEndpoint", "config": {}}),
            "body.config.url",
        ),
        (
            json!({"type": "amazonS3", "config": {"bucket": "b"}}),
            "body.config.bucket",
        ),
        (
            json!({"type": "amazonS3", "config": {"bucket": "bucket", "accessKeyId": "AK"}}),
            "body.config.secretAccessKey",
        ),
        (
            json!({"type": "natsJetStream", "config": {"url": "nats://h:4222", "subject": "a b"}}),
            "body.config.subject",
        ),
        (
            json!({"type": "kafka", "config": {"bootstrapServers": [], "topic": "t"}}),
            "body.config.bootstrapServers",
        ),
        (
            json!({"type": "pollingEndpoint", "config": {}, "batchSize": 0}),
            "body.batchSize",
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(refused(body).await.0, expected);
    }
}

#[tokio::test]
async fn endpoints_and_destinations_are_apart_but_share_the_limit() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(&url, TOKEN, &["--max-endpoints-per-app", "2"]);
    let api = Api::new(&hookd, TOKEN);
    let app = app(&api).await;
    let endpoint = api.endpoint(&app, "http://127.0.0.1:9/hook").await;
    let (status, fifo) = api
        .post(
            &format!("/app/{app}/destination"),
            json!({"type": "fifoEndpoint",
                   "config": {"url": "http://127.0.0.1:9/fifo",
                              "headers": {"x-tenant": "7", "authorization": "Bearer s3cret"}}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{fifo}");
    assert_eq!(fifo["config"]["url"], "http://127.0.0.1:9/fifo");
    assert_eq!(
        fifo["config"]["headers"]["headers"],
        json!({"x-tenant": "7"})
    );
    assert_eq!(
        fifo["config"]["headers"]["sensitive"],
        json!(["authorization"])
    );
    let fifo_id = fifo["id"].as_str().unwrap();

    let (status, full) = api
        .post(
            &format!("/app/{app}/destination"),
            json!({"type": "pollingEndpoint"}),
        )
        .await
        .unwrap();
    assert_eq!((status, refused_field(&full)), (422, "body.type".into()));

    let endpoints = api.get(&format!("/app/{app}/endpoint")).await;
    assert_eq!(endpoints["data"].as_array().unwrap().len(), 1);
    assert_eq!(endpoints["data"][0]["id"], endpoint.as_str());
    let destinations = api.get(&format!("/app/{app}/destination")).await;
    assert_eq!(destinations["data"].as_array().unwrap().len(), 1);
    let (status, _) = api
        .call(
            Method::GET,
            &format!("/app/{app}/endpoint/{fifo_id}"),
            None,
            &[],
        )
        .await;
    assert_eq!(status, 404, "the endpoint routes do not show a destination");
    let (status, _) = api
        .call(
            Method::GET,
            &format!("/app/{app}/destination/{endpoint}"),
            None,
            &[],
        )
        .await;
    assert_eq!(
        status, 404,
        "the destination routes do not show an endpoint"
    );

    // A fifoEndpoint's secret rotates as Svix's Python SDK asks; a rotation's answer is the
    // new secret.
    let (status, rotated) = api
        .call(
            Method::POST,
            &format!("/app/{app}/destination/{fifo_id}/secret/rotate"),
            Some(json!({})),
            &[],
        )
        .await;
    assert_eq!(status, 200, "{rotated}");
    assert!(rotated["key"].as_str().unwrap().starts_with("whsec_"));
}

/// The `data` of a poll answer, verified with the reference `standardwebhooks` crate and the
/// destination's secret; their payloads' `n`.
fn verified(secret: &str, page: &Value) -> Vec<i64> {
    let reference = standardwebhooks::Webhook::new(secret).expect("a whsec_ secret");
    let messages = page["data"].as_array().expect("data");
    messages
        .iter()
        .map(|message| {
            let mut headers = axum::http::HeaderMap::new();
            for (name, value) in message["headers"].as_object().expect("headers") {
                let name = axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap();
                headers.insert(name, value.as_str().unwrap().parse().unwrap());
            }
            let body = serde_json::to_vec(&message["payload"]).unwrap();
            let checked = reference.verify(&body, &headers);
            assert!(checked.is_ok(), "{message}: {checked:?}");
            assert_eq!(message["headers"]["webhook-id"], message["id"]);
            message["payload"]["n"].as_i64().unwrap()
        })
        .collect()
}

/// A polling destination's messages: only settled ones, oldest first, its filters applied,
/// signed; a consumer's position kept by the server and moved by a seek.
async fn polling(database: &str) {
    let time = support::TestTime::start();
    let hookd = time.serve_local(database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let app = app(&api).await;
    let body = json!({"uid": "poller", "type": "pollingEndpoint", "config": {},
                      "eventTypes": ["order.paid"]});
    let secret = made_with_secret(&api, &app, "poller", body).await;
    for (n, event_type) in [(1, "order.paid"), (2, "order.shipped"), (3, "order.paid")] {
        api.publish(&app, event_type, json!({"n": n, "text": "héllo"}))
            .await;
    }
    let poll = format!("/app/{app}/poller/poller");
    let unsettled = api.get(&poll).await;
    assert_eq!(unsettled["data"], json!([]), "{unsettled}");
    assert!(unsettled["iterator"].is_string(), "never null: {unsettled}");

    time.set(10_000);
    let page = api.get(&format!("{poll}?limit=1")).await;
    assert_eq!(verified(&secret, &page), [1]);
    assert_eq!(page["done"], false);
    let iterator = page["iterator"].as_str().unwrap();
    let rest = api.get(&format!("{poll}?iterator={iterator}")).await;
    assert_eq!(
        verified(&secret, &rest),
        [3],
        "order.shipped is filtered out"
    );
    assert_eq!(rest["done"], true);
    let end = rest["iterator"].as_str().unwrap();
    let empty = api.get(&format!("{poll}?iterator={end}")).await;
    assert_eq!(
        (empty["data"].clone(), empty["iterator"].as_str()),
        (json!([]), Some(end))
    );

    // A named consumer reads on from where it got to.
    let consumer = format!("{poll}/consumer/worker-1");
    assert_eq!(
        verified(&secret, &api.get(&format!("{consumer}?limit=1")).await),
        [1]
    );
    assert_eq!(verified(&secret, &api.get(&consumer).await), [3]);
    assert_eq!(api.get(&consumer).await["data"], json!([]));
    let (status, sought) = api
        .call(
            Method::POST,
            &format!("{consumer}/seek"),
            Some(json!({"after": "2020-01-01T00:00:00+00:00"})),
            &[],
        )
        .await;
    assert_eq!(status, 200, "{sought}");
    assert!(sought["iterator"].is_string());
    assert_eq!(verified(&secret, &api.get(&consumer).await), [1, 3]);
    let other = api.get(&format!("{poll}/consumer/worker-2")).await;
    assert_eq!(
        verified(&secret, &other),
        [1, 3],
        "each consumer has its own position"
    );

    // Disabled, it answers nothing and stays where it was.
    let path = format!("/app/{app}/destination/poller");
    let off = json!({"type": "pollingEndpoint", "config": {}, "status": "disabled"});
    let (status, _) = api.call(Method::PATCH, &path, Some(off), &[]).await;
    assert_eq!(status, 200);
    let paused = api.get(&format!("{poll}/consumer/worker-3")).await;
    assert_eq!(paused["data"], json!([]));
    let on = json!({"type": "pollingEndpoint", "config": {}, "status": "enabled"});
    let (status, _) = api.call(Method::PATCH, &path, Some(on), &[]).await;
    assert_eq!(status, 200);
    let resumed = api.get(&format!("{poll}/consumer/worker-3")).await;
    assert_eq!(
        verified(&secret, &resumed),
        [1, 3],
        "nothing was skipped while disabled"
    );
}

#[tokio::test]
async fn a_polling_destination_is_polled_on_sqlite() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    polling(&url).await;
}

#[tokio::test]
async fn a_polling_destination_is_polled_on_postgres() {
    let test = "destinations::a_polling_destination_is_polled_on_postgres";
    let Some((url, _db)) = hookd_store::testing::fresh_postgres(test).await else {
        return;
    };
    polling(&url).await;
}

#[tokio::test]
async fn the_svix_python_sdk_drives_destinations_and_pollers() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    tokio::task::spawn_blocking(move || {
        let Some(python) = python() else { return };
        let time = TestTime::start();
        let hookd = time.serve_local(&url, TOKEN, &[]);
        let args = [hookd.base_url.as_str(), TOKEN, time.offset_file()];
        let output = run_python_script(&python, "svix_destinations_check.py", &args);
        assert!(
            output.contains("svix destinations check passed"),
            "{output}"
        );
    })
    .await
    .expect("the SDK run panicked");
}

#[tokio::test]
async fn the_svix_javascript_sdk_drives_destinations_and_pollers() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    tokio::task::spawn_blocking(move || {
        let Some(package) = process::svix_js_package() else {
            return;
        };
        let time = TestTime::start();
        let hookd = time.serve_local(&url, TOKEN, &[]);
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/crosscheck/svix_destinations_check.mjs"
        );
        let output = std::process::Command::new("node")
            .arg(script)
            .arg(&package)
            .args([hookd.base_url.as_str(), TOKEN, time.offset_file()])
            .output()
            .expect("run node");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("svix js destinations check passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    })
    .await
    .expect("the SDK run panicked");
}

/// A poller token polls its one destination and nothing else; a rotation's older tokens stop
/// working `oldTokenExpiry` later.
#[tokio::test]
async fn a_poller_token_polls_its_destination_only() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    let time = TestTime::start();
    let hookd = time.serve_local(&url, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let app = app(&api).await;
    for uid in ["mine", "other"] {
        let body = json!({"uid": uid, "type": "pollingEndpoint", "config": {}});
        let (status, made) = api
            .post(&format!("/app/{app}/destination"), body)
            .await
            .unwrap();
        assert_eq!(status, 201, "{made}");
    }
    let rotate = format!("/auth/app/{app}/destination/mine/poller/token/rotate");
    let (status, first) = api.post(&rotate, json!({})).await.unwrap();
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["scopes"], json!(["poller"]));
    let (status, second) = api
        .post(&rotate, json!({"oldTokenExpiry": 60}))
        .await
        .unwrap();
    assert_eq!(status, 200, "{second}");
    let poller = api.with_token(second["token"].as_str().unwrap());
    let status_of = async |api: &Api, method: Method, path: &str| {
        let body = (method == Method::POST).then(|| json!({}));
        api.call(method, path, body, &[]).await.0
    };
    let cases = [
        (Method::GET, format!("/app/{app}/poller/mine"), 200),
        (
            Method::GET,
            format!("/app/{app}/poller/mine/consumer/c1"),
            200,
        ),
        (Method::GET, format!("/app/{app}/poller/other"), 404),
        (Method::GET, format!("/app/{app}/destination"), 403),
        (Method::GET, format!("/app/{app}/msg"), 403),
        (Method::POST, rotate.clone(), 403),
    ];
    for (method, path, expected) in cases {
        assert_eq!(
            status_of(&poller, method.clone(), &path).await,
            expected,
            "{method} {path}"
        );
    }
    time.set(120_000);
    let old = api.with_token(first["token"].as_str().unwrap());
    let mine = format!("/app/{app}/poller/mine");
    assert_eq!(
        status_of(&old, Method::GET, &mine).await,
        401,
        "rotated out"
    );
    assert_eq!(status_of(&poller, Method::GET, &mine).await, 200);
}

/// A `fifoEndpoint` is delivered by the engine as an HTTP endpoint is, one message at a time
/// in publish order (the next only once the one before succeeded), with its custom headers
/// (the sealed credential one too), signed with the destination's key.
#[tokio::test]
async fn a_fifo_destination_receives_its_messages_one_at_a_time_in_order() {
    let receiver =
        hookd_engine::testing::Receiver::failing_first(1, axum::http::StatusCode::BAD_GATEWAY)
            .await;
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(&url, TOKEN, &["--retry-schedule", "0,0"]);
    let api = Api::new(&hookd, TOKEN);
    let app = app(&api).await;
    let config = json!({"url": receiver.url,
                        "headers": {"x-tenant": "7", "authorization": "Bearer s3cret"}});
    let body = json!({"uid": "fifo", "type": "fifoEndpoint", "config": config});
    let secret = made_with_secret(&api, &app, "fifo", body).await;
    let mut published = Vec::new();
    for n in 1..=3 {
        published.push(api.publish(&app, "order.paid", json!({"n": n})).await);
    }
    receiver.wait_for(4).await;
    let reference = standardwebhooks::Webhook::new(&secret).unwrap();
    let requests = receiver.requests();
    let ids: Vec<&str> = requests.iter().map(|r| r.header("webhook-id")).collect();
    let expected = [&published[0], &published[0], &published[1], &published[2]];
    assert_eq!(ids, expected, "the first is retried before the next goes");
    for request in &requests {
        assert!(reference.verify(&request.body, &request.headers).is_ok());
        assert_eq!(request.header("x-tenant"), "7");
        assert_eq!(request.header("authorization"), "Bearer s3cret");
    }
}
