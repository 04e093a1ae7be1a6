//! `kill -9` of hookd under load loses no accepted message: every message that got a 202 is
//! delivered after a restart (at least once), with the real binary, a real SQLite file and a
//! real receiver.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use support::{Api, Hookd};

const TOKEN: &str = "crash-test-admin-token";

fn serve(database: &str) -> Hookd {
    Hookd::serve_local(
        database,
        TOKEN,
        &["--lease", "4s", "--attempt-timeout", "1"],
    )
}

/// A number in `0..bound` that differs from run to run.
fn random_below(bound: usize) -> usize {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now()) as usize % bound
}

/// Publishes from `writers` concurrent tasks until `stop_after` are accepted or hookd stops
/// answering; records the id of every message answered 202.
async fn publish(api: &Api, app: &str, accepted: &Arc<Mutex<HashSet<String>>>, stop_after: usize) {
    let in_round = Arc::new(Mutex::new(0usize));
    let writers = (0..8).map(|_| {
        let (api, app, accepted, in_round) = (
            api.clone(),
            app.to_owned(),
            accepted.clone(),
            in_round.clone(),
        );
        tokio::spawn(async move {
            loop {
                if *in_round.lock().unwrap() >= stop_after {
                    return;
                }
                let body = serde_json::json!({"eventType": "order.shipped", "payload": {"n": 1}});
                match api.post(&format!("/app/{app}/msg"), body).await {
                    Ok((202, out)) => {
                        accepted
                            .lock()
                            .unwrap()
                            .insert(out["id"].as_str().unwrap().to_owned());
                        *in_round.lock().unwrap() += 1;
                    }
                    Ok((status, out)) => panic!("publish answered {status}: {out}"),
                    Err(_) => return, // hookd was killed
                }
            }
        })
    });
    for writer in writers.collect::<Vec<_>>() {
        writer.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_loses_no_accepted_message() {
    let receiver = Receiver::start(|_| async {
        tokio::time::sleep(Duration::from_millis(5)).await;
        StatusCode::OK
    })
    .await;
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let accepted = Arc::new(Mutex::new(HashSet::new()));
    let mut hookd = serve(&database);
    let app = Api::new(&hookd, TOKEN)
        .app_with_endpoint(&receiver.url)
        .await;

    for _ in 0..3 {
        let api = Api::new(&hookd, TOKEN);
        let killer = {
            let accepted = accepted.clone();
            let target = accepted.lock().unwrap().len() + 20 + random_below(60);
            async move {
                while accepted.lock().unwrap().len() < target {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        };
        tokio::join!(publish(&api, &app, &accepted, usize::MAX), async {
            killer.await;
            hookd.kill_hard();
        });
        hookd = serve(&database);
    }
    let api = Api::new(&hookd, TOKEN);
    publish(&api, &app, &accepted, 50).await;

    let accepted = accepted.lock().unwrap().clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let received: HashSet<String> = receiver
            .requests()
            .iter()
            .map(|r| r.header("webhook-id").to_owned())
            .collect();
        let missing = accepted.difference(&received).count();
        if missing == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{missing} of {} accepted messages never arrived",
            accepted.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        accepted.len() > 100,
        "the test published under load ({} accepted)",
        accepted.len()
    );
}
