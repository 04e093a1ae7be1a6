//! Ordered delivery end to end: messages that share an `orderingKey` reach the receiver one at
//! a time, in the order they were published, while other keys go on in parallel; a key's head
//! that keeps failing holds back its key only; `kill -9` never lets a message overtake its
//! predecessor. The real binary, a real SQLite file or PostgreSQL database (one process or
//! two), and a receiver on loopback that checks each request against what it has answered.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering as Atomic};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use support::{Api, Hookd, TestTime};

const TOKEN: &str = "ordered-test-admin-token";

/// A receiver that knows each message's key and place (`{"key", "seq"}` payloads): it notes a
/// request that arrives before the message ahead of it was answered 2xx, answers 500 to the
/// messages told to fail (as many times as told), and 200 to the rest.
#[derive(Clone, Default)]
struct KeyedReceiver {
    /// Per key, the places answered 2xx, in the order answered.
    answered: Arc<Mutex<HashMap<String, Vec<u64>>>>,
    /// Requests that came before their predecessor was answered: (key, place).
    early: Arc<Mutex<Vec<(String, u64)>>>,
    /// Failures still to answer, by (key, place).
    failures: Arc<Mutex<HashMap<(String, u64), usize>>>,
    /// Requests of any key in flight now, and the most seen at once.
    in_flight: Arc<AtomicUsize>,
    most_in_flight: Arc<AtomicUsize>,
}

impl KeyedReceiver {
    /// Serves on a free loopback port; returns its URL.
    async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .route("/hook", post(receive))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    fn fail(&self, key: &str, seq: u64, times: usize) {
        self.failures
            .lock()
            .unwrap()
            .insert((key.to_owned(), seq), times);
    }

    /// The places of `key` answered 2xx, first answers only, in the order answered.
    fn delivered(&self, key: &str) -> Vec<u64> {
        let answered = self.answered.lock().unwrap();
        let mut seen = std::collections::HashSet::new();
        answered
            .get(key)
            .into_iter()
            .flatten()
            .copied()
            .filter(|seq| seen.insert(*seq))
            .collect()
    }

    fn early(&self) -> Vec<(String, u64)> {
        self.early.lock().unwrap().clone()
    }
}

async fn receive(State(r): State<KeyedReceiver>, body: axum::body::Bytes) -> StatusCode {
    let payload: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let key = payload["key"].as_str().unwrap().to_owned();
    let seq = payload["seq"].as_u64().unwrap();
    let now = r.in_flight.fetch_add(1, Atomic::SeqCst) + 1;
    r.most_in_flight.fetch_max(now, Atomic::SeqCst);
    let predecessor_answered = seq == 0
        || r.answered
            .lock()
            .unwrap()
            .get(&key)
            .is_some_and(|places| places.contains(&(seq - 1)));
    if !predecessor_answered {
        r.early.lock().unwrap().push((key.clone(), seq));
    }
    // Long enough for the other keys' requests to overlap this one.
    tokio::time::sleep(Duration::from_millis(2)).await;
    let fail = {
        let mut failures = r.failures.lock().unwrap();
        match failures.get_mut(&(key.clone(), seq)) {
            Some(left) if *left > 0 => {
                *left -= 1;
                true
            }
            _ => false,
        }
    };
    if !fail {
        r.answered.lock().unwrap().entry(key).or_default().push(seq);
    }
    r.in_flight.fetch_sub(1, Atomic::SeqCst);
    if fail {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    }
}

/// Publishes `{"key", "seq"}` as message `seq` of `key` (its `eventId` says which, so a
/// publish retried after a kill is answered 409, not written twice). `Err` if hookd is gone.
async fn publish_keyed(api: &Api, app: &str, key: &str, seq: u64) -> Result<(), ()> {
    let body = serde_json::json!({
        "eventType": "consignment.updated",
        "eventId": format!("{key}-{seq}"),
        "orderingKey": key,
        "payload": {"key": key, "seq": seq},
    });
    match api.post(&format!("/app/{app}/msg"), body).await {
        Ok((202 | 409, _)) => Ok(()),
        Ok((status, out)) => panic!("publish answered {status}: {out}"),
        Err(_) => Err(()),
    }
}

/// Publishes `per_key` messages for each of `keys` keys, each key's in order (one after the
/// other's answer) and the keys concurrently, spreading the keys over `apis`.
async fn publish_keys(apis: &[Api], app: &str, keys: usize, per_key: u64) {
    let tasks = (0..keys).map(|k| {
        let apis = apis.to_vec();
        let app = app.to_owned();
        tokio::spawn(async move {
            for seq in 0..per_key {
                let api = &apis[(k + seq as usize) % apis.len()];
                publish_keyed(api, &app, &format!("key-{k}"), seq)
                    .await
                    .expect("hookd answers");
            }
        })
    });
    for task in tasks.collect::<Vec<_>>() {
        task.await.unwrap();
    }
}

/// Waits (bounded) until every key of `keys` has had `per_key` places answered.
async fn all_delivered(receiver: &KeyedReceiver, keys: usize, per_key: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let short: Vec<(usize, usize)> = (0..keys)
            .map(|k| (k, receiver.delivered(&format!("key-{k}")).len()))
            .filter(|(_, n)| *n < per_key as usize)
            .collect();
        if short.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "keys short of {per_key} deliveries (key, delivered): {short:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every key's places arrived in order, each only after the one before was answered.
fn assert_in_order(receiver: &KeyedReceiver, keys: usize, per_key: u64) {
    assert_eq!(receiver.early(), Vec::new(), "requests ahead of their turn");
    for k in 0..keys {
        let key = format!("key-{k}");
        assert_eq!(
            receiver.delivered(&key),
            (0..per_key).collect::<Vec<_>>(),
            "{key}"
        );
    }
}

/// 50 keys of 100 messages through `processes` hookd processes on `database`.
async fn fifty_keys_of_a_hundred(database: &str, processes: usize) {
    let receiver = KeyedReceiver::default();
    let url = receiver.start().await;
    let hookds: Vec<Hookd> = (0..processes)
        .map(|_| Hookd::serve_local(database, TOKEN, &[]))
        .collect();
    let apis: Vec<Api> = hookds.iter().map(|h| Api::new(h, TOKEN)).collect();
    let app = apis[0].app_with_endpoint(&url).await;
    publish_keys(&apis, &app, 50, 100).await;
    all_delivered(&receiver, 50, 100).await;
    assert_in_order(&receiver, 50, 100);
    assert!(
        receiver.most_in_flight.load(Atomic::SeqCst) > 1,
        "the keys went on in parallel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_keys_of_a_hundred_arrive_in_order_per_key_on_sqlite() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    fifty_keys_of_a_hundred(&database, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_keys_of_a_hundred_arrive_in_order_per_key_on_postgres_with_two_processes() {
    let Some((database, _guard)) = hookd_store::testing::fresh_postgres(
        "fifty_keys_of_a_hundred_arrive_in_order_per_key_on_postgres_with_two_processes",
    )
    .await
    else {
        return;
    };
    fifty_keys_of_a_hundred(&database, 2).await;
}

/// The seed's consignment `C-4471`: `created` (place 0) arrives, `in transit` (place 1) fails
/// three times, and `delivered` (place 2) waits behind it and reaches the receiver only after
/// it; another key and unordered messages never wait.
async fn a_failing_head_holds_back_its_key_only(database: &str) {
    let time = TestTime::start();
    let receiver = KeyedReceiver::default();
    receiver.fail("C-4471", 1, 3);
    let url = receiver.start().await;
    let hookd = time.serve_local(database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&url).await;
    for seq in 0..3 {
        publish_keyed(&api, &app, "C-4471", seq).await.unwrap();
    }
    for seq in 0..20 {
        publish_keyed(&api, &app, "C-9", seq).await.unwrap();
    }
    for seq in 0..20 {
        let payload = serde_json::json!({"key": format!("free-{seq}"), "seq": 0});
        api.publish(&app, "consignment.updated", payload).await;
    }
    support::eventually(async || {
        let free = (0..20)
            .filter(|n| !receiver.delivered(&format!("free-{n}")).is_empty())
            .count();
        match (
            receiver.delivered("C-9").len(),
            free,
            receiver.delivered("C-4471"),
        ) {
            (20, 20, created) if created == [0] => Ok(()),
            other => Err(format!("C-9, unordered and C-4471 delivered: {other:?}")),
        }
    })
    .await;
    let path = format!("/app/{app}/msg?event_types=consignment.updated&limit=250");
    let listed = api.get(&path).await;
    let id_of = |event_id: &str| {
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["eventId"] == event_id)
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let (in_transit, delivered) = (id_of("C-4471-1"), id_of("C-4471-2"));
    // Once `created` is recorded, `delivered` waits behind `in transit`.
    support::eventually(async || {
        let waiting = api
            .get(&format!("/app/{app}/msg/{delivered}/endpoint"))
            .await;
        let row = &waiting["data"][0];
        match (&row["status"], &row["waitingBehind"]) {
            (status, behind) if *status == 1 && *behind == in_transit.as_str() => Ok(()),
            _ => Err(format!("not waiting behind {in_transit}: {waiting}")),
        }
    })
    .await;
    assert_eq!(receiver.delivered("C-4471"), [0]);
    // Retries come due as the clock moves (the schedule's first three waits are under an hour
    // each); only then does `delivered` go, after `in transit`.
    for hour in 1..=4 {
        time.set(hour * 3_600_000);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
    }
    support::eventually(async || match receiver.delivered("C-4471").as_slice() {
        [0, 1, 2] => Ok(()),
        other => Err(format!("C-4471 delivered: {other:?}")),
    })
    .await;
    assert_eq!(receiver.early(), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_head_holds_back_its_key_only_on_sqlite() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    a_failing_head_holds_back_its_key_only(&database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_head_holds_back_its_key_only_on_postgres() {
    let Some((database, _guard)) =
        hookd_store::testing::fresh_postgres("a_failing_head_holds_back_its_key_only_on_postgres")
            .await
    else {
        return;
    };
    a_failing_head_holds_back_its_key_only(&database).await;
}

/// hookd killed three times while 20 keys of 30 messages are published and delivered: every
/// message arrives, and none before its predecessor was answered (some may arrive twice).
async fn kill_9_keeps_the_order(database: &str) {
    let receiver = KeyedReceiver::default();
    let url = receiver.start().await;
    let serve = || Hookd::serve_local(database, TOKEN, &["--lease", "4s"]);
    let mut hookd = serve();
    let app = Api::new(&hookd, TOKEN).app_with_endpoint(&url).await;
    let (keys, per_key) = (20usize, 30u64);
    let next: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(vec![0; keys]));
    for round in 0..4 {
        let api = Api::new(&hookd, TOKEN);
        let publishers = (0..keys).map(|k| {
            let (api, app, next) = (api.clone(), app.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let seq = next.lock().unwrap()[k];
                    if seq == per_key {
                        return;
                    }
                    if publish_keyed(&api, &app, &format!("key-{k}"), seq)
                        .await
                        .is_err()
                    {
                        return; // killed: this place is published again after the restart
                    }
                    next.lock().unwrap()[k] = seq + 1;
                }
            })
        });
        let publishers: Vec<_> = publishers.collect();
        if round < 3 {
            tokio::time::sleep(Duration::from_millis(150 + 100 * round)).await;
            hookd.kill_hard();
        }
        for publisher in publishers {
            publisher.await.unwrap();
        }
        if round < 3 {
            hookd = serve();
        }
    }
    all_delivered(&receiver, keys, per_key).await;
    assert_in_order(&receiver, keys, per_key);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_run_keeps_every_key_in_order_on_sqlite() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    kill_9_keeps_the_order(&database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_run_keeps_every_key_in_order_on_postgres() {
    let Some((database, _guard)) =
        hookd_store::testing::fresh_postgres("kill_9_mid_run_keeps_every_key_in_order_on_postgres")
            .await
    else {
        return;
    };
    kill_9_keeps_the_order(&database).await;
}
