//! hookd on PostgreSQL as a cluster, with the real binary, a real database and a real
//! receiver: an API-only process hands its messages to an engine-only one; three processes
//! (two serving the API and delivering, one delivering only) share the work, and `kill -9` of
//! one loses nothing, duplicating only the attempts it had in flight. Skipped when
//! `HOOKD_TEST_POSTGRES_URL` is unset.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use hookd_store::testing::fresh_postgres;
use support::{Api, Hookd};

const TOKEN: &str = "cluster-test-admin-token";
const WORKERS: &str = "16";

fn serve(database: &str, extra: &[&str]) -> Hookd {
    let mut args = vec![
        "--lease",
        "4s",
        "--attempt-timeout",
        "1",
        "--workers",
        WORKERS,
    ];
    args.extend_from_slice(extra);
    Hookd::serve_local(database, TOKEN, &args)
}

/// Waits (bounded) until `done` holds, checking every 50 ms.
async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_only_process_hands_its_messages_to_an_engine_only_one() {
    let Some((url, _db)) = fresh_postgres("cluster::roles").await else {
        return;
    };
    let receiver = Receiver::always(StatusCode::OK).await;
    let api_only = serve(&url, &["--role", "api"]);
    let api = Api::new(&api_only, TOKEN);
    let app = api.app_with_endpoint(&receiver.url).await;
    // Published before any engine runs: nothing can deliver them yet.
    for n in 0..10 {
        let body = serde_json::json!({"eventType": "order.shipped", "payload": {"n": n}});
        assert_eq!(
            api.post(&format!("/app/{app}/msg"), body).await.unwrap().0,
            202
        );
    }
    // An engine would have claimed them within its poll (a second), had the API process run one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(receiver.count(), 0, "an API-only process delivers nothing");
    let _engine_only = serve(&url, &["--role", "engine"]);
    receiver.wait_for(10).await;
    // And once it runs, a message published on the other process reaches it (by a
    // notification, which hookd-store's outbox tests show arriving with nothing polling).
    let body = serde_json::json!({"eventType": "order.shipped", "payload": {"n": 10}});
    assert_eq!(
        api.post(&format!("/app/{app}/msg"), body).await.unwrap().0,
        202
    );
    receiver.wait_for(11).await;
}

/// Publishes through `apis` in turn from four tasks until `stop`; records every message
/// answered 202. A process that stopped answering is left out from then on.
async fn publish(
    apis: Vec<Api>,
    app: String,
    accepted: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
) {
    let turn = Arc::new(AtomicUsize::new(0));
    let dead: Arc<Mutex<Vec<bool>>> = Arc::new(Mutex::new(vec![false; apis.len()]));
    let writers = (0..4).map(|_| {
        let (apis, app, accepted, stop, turn, dead) = (
            apis.clone(),
            app.clone(),
            accepted.clone(),
            stop.clone(),
            turn.clone(),
            dead.clone(),
        );
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let i = turn.fetch_add(1, Ordering::SeqCst) % apis.len();
                if dead.lock().unwrap()[i] {
                    continue;
                }
                let body = serde_json::json!({"eventType": "order.shipped", "payload": {"n": 1}});
                match apis[i].post(&format!("/app/{app}/msg"), body).await {
                    Ok((202, out)) => accepted
                        .lock()
                        .unwrap()
                        .push(out["id"].as_str().unwrap().to_owned()),
                    Ok((status, out)) => panic!("publish answered {status}: {out}"),
                    Err(_) => dead.lock().unwrap()[i] = true, // that process was killed
                }
            }
        })
    });
    for writer in writers.collect::<Vec<_>>() {
        writer.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_share_the_work_and_kill_9_of_one_loses_nothing() {
    let Some((url, _db)) = fresh_postgres("cluster::kill_9").await else {
        return;
    };
    let receiver = Receiver::start(|_| async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        StatusCode::OK
    })
    .await;
    let first = serve(&url, &[]);
    let mut second = serve(&url, &[]);
    let _deliverer = serve(&url, &["--role", "engine"]);
    let (api1, api2) = (Api::new(&first, TOKEN), Api::new(&second, TOKEN));
    let app = api1.app_with_endpoint(&receiver.url).await;
    // The endpoint takes as many at once as all three processes can send.
    let endpoints = api1.get(&format!("/app/{app}/endpoint")).await;
    assert_eq!(endpoints["data"].as_array().unwrap().len(), 1);

    let accepted = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let publishing = tokio::spawn(publish(
        vec![api1.clone(), api2.clone()],
        app.clone(),
        accepted.clone(),
        stop.clone(),
    ));
    // Kill the second process in the middle of the traffic.
    eventually("traffic before the kill", async || {
        accepted.lock().unwrap().len() >= 150 && receiver.count() >= 50
    })
    .await;
    second.kill_hard();
    let at_kill = accepted.lock().unwrap().len();
    eventually("traffic after the kill", async || {
        accepted.lock().unwrap().len() >= at_kill + 150
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    publishing.await.unwrap();

    let accepted = accepted.lock().unwrap().clone();
    let received = || {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for request in receiver.requests() {
            *counts
                .entry(request.header("webhook-id").to_owned())
                .or_default() += 1;
        }
        counts
    };
    eventually("every accepted message delivered", async || {
        let counts = received();
        accepted.iter().all(|id| counts.contains_key(id))
    })
    .await;
    // Duplicates only for attempts the killed process had in flight (the receiver got one
    // more than the attempts on record: the killed process never recorded its own), or for a
    // retry after a recorded failure (an attempt that timed out on a loaded machine may still
    // have reached the receiver). Two recorded successes would be a double delivery.
    let counts = received();
    let duplicated: Vec<(&String, usize)> = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, n)| (id, *n))
        .collect();
    let mut unrecorded = 0;
    for (id, n) in duplicated {
        let (mut recorded, mut succeeded) = (0, 0);
        eventually("the duplicate's attempts are recorded", async || {
            let attempts = api1.get(&format!("/app/{app}/attempt/msg/{id}")).await;
            let attempts = attempts["data"].as_array().unwrap().clone();
            recorded = attempts.len();
            succeeded = attempts.iter().filter(|a| a["status"] == 0).count();
            recorded + 1 >= n && succeeded >= 1
        })
        .await;
        let in_flight_at_kill = recorded + 1 == n;
        let retried_after_failure = recorded == n && succeeded < recorded;
        assert!(
            succeeded == 1 && (in_flight_at_kill || retried_after_failure),
            "{id}: received {n} times, {recorded} attempts recorded, {succeeded} successful"
        );
        unrecorded += usize::from(in_flight_at_kill);
    }
    // A worker is held until its attempt is recorded, so the killed process left at most one
    // unrecorded attempt per worker.
    assert!(
        unrecorded <= WORKERS.parse().unwrap(),
        "{unrecorded} attempts went unrecorded, more than the killed process had workers"
    );
    // A message the killed process committed but could not answer 202 for is delivered too
    // (at least once); at most one per publishing task can be caught like that.
    let unanswered = counts.keys().filter(|id| !accepted.contains(id)).count();
    assert!(
        unanswered <= 4,
        "{unanswered} delivered messages were never published"
    );
}

/// An endpoint that answers 429 gets no new work for the pause it asked for (a second, without
/// `Retry-After`) from every process on the database, not only from the one that heard it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_pauses_the_endpoint_for_every_process() {
    let Some((url, _db)) = fresh_postgres("cluster::slow_down").await else {
        return;
    };
    let receiver = Receiver::failing_first(1, StatusCode::TOO_MANY_REQUESTS).await;
    let processes = [serve(&url, &[]), serve(&url, &[])];
    let apis = processes.each_ref().map(|p| Api::new(p, TOKEN));
    let app = apis[0].app_with_endpoint(&receiver.url).await;
    let told = apis[0]
        .publish(&app, "order.shipped", serde_json::json!({}))
        .await;
    let attempts = format!("/app/{app}/attempt/msg/{told}");
    eventually("the 429 recorded", async || {
        !apis[0].get(&attempts).await["data"]
            .as_array()
            .unwrap()
            .is_empty()
    })
    .await;

    // One message through each process: the one that did not hear the 429 would send its own
    // at once, were the pause kept only where it was heard.
    for api in &apis {
        api.publish(&app, "order.shipped", serde_json::json!({}))
            .await;
    }
    receiver.wait_for(3).await;
    let arrivals = receiver.requests();
    for later in &arrivals[1..] {
        let waited = later.at - arrivals[0].at;
        assert!(
            waited >= Duration::from_secs(1),
            "a message went out {waited:?} after the 429"
        );
    }
}
