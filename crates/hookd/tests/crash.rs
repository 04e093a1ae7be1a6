//! `kill -9` of hookd under load loses no accepted message: every message that got a 202 is
//! delivered after a restart (at least once), with the real binary, a real SQLite file or
//! PostgreSQL database and a real receiver. hookd is killed 20 times, each time at a random
//! moment while messages are being published and delivered.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use support::{Api, Hookd};

const TOKEN: &str = "crash-test-admin-token";
/// How many times hookd is killed in one test.
const KILLS: usize = 20;

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

/// Kills hookd `KILLS` times under publish+deliver load on `database`, then checks that every
/// accepted message reached the receiver.
async fn kill_9_under_load(database: &str) {
    let receiver = Receiver::start(|_| async {
        tokio::time::sleep(Duration::from_millis(5)).await;
        StatusCode::OK
    })
    .await;
    let accepted = Arc::new(Mutex::new(HashSet::new()));
    let mut hookd = serve(database);
    let app = Api::new(&hookd, TOKEN)
        .app_with_endpoint(&receiver.url)
        .await;

    for _ in 0..KILLS {
        let api = Api::new(&hookd, TOKEN);
        let killer = {
            let accepted = accepted.clone();
            // A random number of accepted messages, then a random few milliseconds more: the
            // kill lands mid-publish, mid-attempt or mid-commit.
            let target = accepted.lock().unwrap().len() + 5 + random_below(40);
            let extra = Duration::from_millis(random_below(20) as u64);
            async move {
                while accepted.lock().unwrap().len() < target {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                tokio::time::sleep(extra).await;
            }
        };
        tokio::join!(publish(&api, &app, &accepted, usize::MAX), async {
            killer.await;
            hookd.kill_hard();
        });
        hookd = serve(database);
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
        accepted.len() > KILLS * 5,
        "the test published under load ({} accepted)",
        accepted.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_twenty_times_under_load_loses_no_accepted_message_on_sqlite() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    kill_9_under_load(&database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_twenty_times_under_load_loses_no_accepted_message_on_postgres() {
    let Some((database, _guard)) = hookd_store::testing::fresh_postgres(
        "kill_9_twenty_times_under_load_loses_no_accepted_message_on_postgres",
    )
    .await
    else {
        return;
    };
    kill_9_under_load(&database).await;
}
