//! Background tasks end to end, with the real binary, its engine's task runner and a real
//! receiver: `replay-missing` sends an endpoint the messages it never had (published before it
//! existed) and nothing twice; `expunge-all-contents` drops every payload of an application;
//! both report their progress in `GET /background-task/{id}` and the list. On SQLite and, with
//! `HOOKD_TEST_POSTGRES_URL`, PostgreSQL.

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use hookd_store::testing::fresh_postgres;
use serde_json::{Value, json};
use support::{Api, Hookd};

const TOKEN: &str = "background-tasks-test-admin-token";

/// Waits (bounded) until the task is no longer running; returns it.
async fn finished(api: &Api, task: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let task = api.get(&format!("/background-task/{task}")).await;
        if task["status"] != "running" {
            return task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running: {task}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn replay_sends_what_an_endpoint_missed_once_and_expunge_drops_every_payload(database: &str) {
    let receiver = Receiver::always(StatusCode::OK).await;
    let hookd = Hookd::serve_local(database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let (_, app) = api.post("/app", json!({"name": "tasks"})).await.unwrap();
    let app = app["id"].as_str().unwrap().to_owned();
    for n in 0..3 {
        api.publish(&app, "order.shipped", json!({ "n": n })).await;
    }
    let endpoint = api.endpoint(&app, &receiver.url).await;
    let replay = format!("/app/{app}/endpoint/{endpoint}/replay-missing");

    let (status, started) = api
        .post(&replay, json!({"since": "2020-01-01T00:00:00Z"}))
        .await
        .unwrap();

    assert_eq!(status, 202, "{started}");
    assert_eq!(
        (&started["status"], &started["task"]),
        (&json!("running"), &json!("endpoint.replay"))
    );
    let task = finished(&api, started["id"].as_str().unwrap()).await;
    assert_eq!(task["status"], "finished", "{task}");
    assert_eq!(task["data"]["messagesSent"], 3, "{task}");
    assert_eq!(task["data"]["endpointId"], endpoint.as_str());
    receiver.wait_for(3).await;
    // Nothing is missing any more: a second replay queues nothing.
    let (_, again) = api
        .post(&replay, json!({"since": "2020-01-01T00:00:00Z"}))
        .await
        .unwrap();
    let again = finished(&api, again["id"].as_str().unwrap()).await;
    assert_eq!(again["data"]["messagesSent"], 0, "{again}");
    assert_eq!(receiver.requests().len(), 3, "nothing sent twice");

    let (status, expunge) = api
        .post(&format!("/app/{app}/msg/expunge-all-contents"), json!({}))
        .await
        .unwrap();
    assert_eq!(status, 202, "{expunge}");
    let expunge = finished(&api, expunge["id"].as_str().unwrap()).await;
    assert_eq!(expunge["task"], "application.purge_content");
    assert_eq!(expunge["data"]["messagesPurged"], 3, "{expunge}");
    for message in api.get_all(&format!("/app/{app}/msg")).await {
        assert_eq!(message["payload"], json!({"expired": true}), "{message}");
    }
    let listed = api.get("/background-task?task=endpoint.replay").await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 2, "{listed}");
    assert_eq!(listed["data"][0]["id"], again["id"], "newest first");
    let oldest_first = api
        .get("/background-task?task=endpoint.replay&order=ascending")
        .await;
    assert_eq!(oldest_first["data"][1]["id"], again["id"], "{oldest_first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_replay_and_expunge_run_as_background_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("hookd.db").display());
    replay_sends_what_an_endpoint_missed_once_and_expunge_drops_every_payload(&database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replay_and_expunge_run_as_background_tasks() {
    let Some((url, _db)) = fresh_postgres("background_tasks::postgres").await else {
        return;
    };
    replay_sends_what_an_endpoint_missed_once_and_expunge_drops_every_payload(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_names_the_field_and_unknown_tasks_are_404() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("hookd.db").display());
    let hookd = Hookd::serve_local(&database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint("http://127.0.0.1:9/hook").await;
    let endpoints = api.get(&format!("/app/{app}/endpoint")).await;
    let endpoint = endpoints["data"][0]["id"].as_str().unwrap().to_owned();
    let replay = format!("/app/{app}/endpoint/{endpoint}/replay-missing");

    let (status, body) = api
        .post(&replay, json!({"since": "yesterday"}))
        .await
        .unwrap();
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("since"), "{body}");
    let backwards = json!({"since": "2024-01-02T00:00:00Z", "until": "2024-01-01T00:00:00Z"});
    let (status, body) = api.post(&replay, backwards).await.unwrap();
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("until"), "{body}");
    let missing = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/background-task/qtask_none",
            hookd.base_url
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
}
