//! Destinations beyond HTTP end to end: the real `hookd` binary on a real database, publishing
//! to real brokers made by the tests (RabbitMQ, NATS JetStream, SQS, SNS and S3 on
//! `moto_server`, Kafka on librdkafka's mock cluster), and each broker's own client reading back what arrived. Every
//! message published through the API arrives (at least once) with the published payload's
//! bytes as its body, Standard Webhooks headers that the reference `standardwebhooks` crate
//! verifies with the destination's secret, and its event type and ordering key; the delivery
//! log holds the broker's acknowledgement. A broker cut off mid-run, or `kill -9` of hookd
//! mid-run, loses nothing; a broker that never answers does not hold up an HTTP endpoint of
//! the same application.
//!
//! Services: `HOOKD_TEST_RABBITMQ_URL` (`amqp://guest:guest@127.0.0.1:5672/%2f`),
//! `HOOKD_TEST_NATS_URL` (`nats://127.0.0.1:4222`, JetStream on), `HOOKD_TEST_MOTO` (the path
//! of `moto_server`, or `1` for the one on `PATH`; boto3 is run by the Python beside it), and
//! `HOOKD_TEST_POSTGRES_URL` for the PostgreSQL run. A test whose service is unset prints
//! `SKIPPED`, and fails instead under `HOOKD_TEST_REQUIRE_<NAME>=1`. Kafka needs none.
//!
//! The destination's signing secret is read from hookd's database (opened with the test
//! master key), apart from the API; one test checks that `GET …/destination/{id}/secret`
//! shows the same.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use hookd_core::AppId;
use hookd_engine::testing::Receiver;
use hookd_vault::{EndpointKeys, Keyring};
use lapin::options::{BasicGetOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable};
use serde_json::{Value, json};
use support::{Api, Hookd, TestTime, eventually};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const TOKEN: &str = "destination-delivery-admin-token";
/// Messages published per test.
const N: usize = 50;
/// Publishes the kill test goes on with until the kill stops hookd (a bound, never reached).
const MOST_BEFORE_KILL: usize = 5_000;
const EVENT_TYPE: &str = "order.shipped";
/// The ordering keys messages cycle through where order is checked.
const KEYS: [&str; 3] = ["customer-0", "customer-1", "customer-2"];
/// Past the schedule's second wait (5 s, up to 10 % more): the first retry is due.
const PAST_FIRST_RETRY_MS: u64 = 6_000;

// ---------------------------------------------------------------------------------------------
// What every test shares: skipping, publishing, reading the secret, checking what arrived.

/// Says `test` is skipped, on the real stderr (past the harness's capture, so it is seen).
fn skipped(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// The service URL in `HOOKD_TEST_<name>_URL`: `None` (after saying so) when unset, a failure
/// when `HOOKD_TEST_REQUIRE_<name>=1`.
fn service_url(test: &str, name: &str) -> Option<String> {
    let url_var = format!("HOOKD_TEST_{name}_URL");
    let require_var = format!("HOOKD_TEST_REQUIRE_{name}");
    if let Some(url) = std::env::var(&url_var).ok().filter(|url| !url.is_empty()) {
        return Some(url);
    }
    assert!(
        std::env::var(&require_var).as_deref() != Ok("1"),
        "{test}: {require_var}=1 but {url_var} is not set"
    );
    skipped(test, &format!("{url_var} not set"));
    None
}

/// A fresh name for a queue, stream or topic.
fn unique(prefix: &str) -> String {
    format!("{prefix}{}", hookd_store::testing::random_hex())
}

/// A message as published: its id, the payload's bytes as sent, its ordering key.
#[derive(Clone, Debug)]
struct Sent {
    id: String,
    body: Vec<u8>,
    key: Option<String>,
}

/// A message as a broker's client read it: body and headers (or attributes).
#[derive(Clone, Debug)]
struct Arrived {
    body: Vec<u8>,
    headers: Vec<(String, String)>,
}

impl Arrived {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    fn id(&self) -> &str {
        self.header("webhook-id").expect("a webhook-id header")
    }
}

/// hookd on a fresh SQLite file or PostgreSQL database, with an application.
struct Run {
    hookd: Hookd,
    api: Api,
    app: String,
    database: String,
    time: TestTime,
    _db: Box<dyn std::any::Any>,
}

impl Run {
    async fn on(database: String, db_guard: Box<dyn std::any::Any>, extra: &[&str]) -> Self {
        let time = TestTime::start();
        let hookd = time.serve_local(&database, TOKEN, extra);
        let api = Api::new(&hookd, TOKEN);
        let (status, app) = api.post("/app", json!({"name": "shop"})).await.unwrap();
        assert_eq!(status, 201, "{app}");
        Self {
            app: app["id"].as_str().unwrap().to_owned(),
            hookd,
            api,
            database,
            time,
            _db: db_guard,
        }
    }

    async fn sqlite(extra: &[&str]) -> Self {
        let (database, dir) = hookd_store::testing::fresh_sqlite();
        Self::on(database, Box::new(dir), extra).await
    }

    /// On PostgreSQL, or `None` when `HOOKD_TEST_POSTGRES_URL` is unset.
    async fn postgres(test: &str) -> Option<Self> {
        let (database, guard) = hookd_store::testing::fresh_postgres(test).await?;
        Some(Self::on(database, Box::new(guard), &[]).await)
    }

    /// hookd killed with SIGKILL and started again on the same database and clock.
    fn restart_after_kill_9(&mut self, extra: &[&str]) {
        self.hookd.kill_hard();
        self.hookd = self.time.serve_local(&self.database, TOKEN, extra);
        self.api = Api::new(&self.hookd, TOKEN);
    }

    /// Creates a destination of `kind`; its id.
    async fn destination(&self, kind: &str, config: Value) -> String {
        let path = format!("/app/{}/destination", self.app);
        let body = json!({"type": kind, "config": config});
        let (status, made) = self.api.post(&path, body).await.unwrap();
        assert_eq!(status, 201, "{made}");
        made["id"].as_str().unwrap().to_owned()
    }

    /// Publishes message `n` with ordering key `key`; what was sent.
    async fn publish(&self, n: usize, key: Option<&str>) -> Sent {
        self.try_publish(n, key)
            .await
            .expect("hookd answers while it runs")
    }

    /// [`Run::publish`], or `None` when hookd did not answer (it was killed).
    async fn try_publish(&self, n: usize, key: Option<&str>) -> Option<Sent> {
        let payload = payload(n);
        let body = json!({"eventType": EVENT_TYPE, "payload": payload, "orderingKey": key});
        let (status, message) = self
            .api
            .post(&format!("/app/{}/msg", self.app), body)
            .await
            .ok()?;
        assert_eq!(status, 202, "{message}");
        Some(Sent {
            id: message["id"].as_str().unwrap().to_owned(),
            body: serde_json::to_vec(&payload).unwrap(),
            key: key.map(str::to_owned),
        })
    }

    /// Publishes messages `range`, ordering keys cycling through [`KEYS`] when `keyed`.
    async fn publish_range(&self, range: std::ops::Range<usize>, keyed: bool) -> Vec<Sent> {
        let mut sent = Vec::new();
        for n in range {
            sent.push(self.publish(n, keyed.then_some(KEYS[n % KEYS.len()])).await);
        }
        sent
    }

    /// Every message hookd holds, as published (their payloads are [`payload`]'s).
    async fn stored_messages(&self) -> Vec<Sent> {
        let messages = self.api.get_all(&format!("/app/{}/msg", self.app)).await;
        messages
            .iter()
            .map(|message| Sent {
                id: message["id"].as_str().unwrap().to_owned(),
                body: serde_json::to_vec(&payload(
                    message["payload"]["n"].as_u64().unwrap() as usize
                ))
                .unwrap(),
                key: message["orderingKey"].as_str().map(str::to_owned),
            })
            .collect()
    }

    /// The destination's signing secret (`whsec_…`), read from the database hookd writes and
    /// opened with the test master key: no API route shows a broker destination's secret.
    async fn signing_secret(&self, destination: &str) -> String {
        let store = hookd_store::open(&self.database).await.unwrap();
        let app = AppId::from_stored(self.app.clone());
        let row = store.get_endpoint(&app, destination).await.unwrap();
        let row = row.expect("the destination's row");
        let keyring = Keyring::parse(support::TEST_MASTER_KEY).unwrap();
        let keys = EndpointKeys::open(&keyring, &row.id, &row.keys).unwrap();
        keys.secret().expect("an HMAC signing secret").to_string()
    }

    /// The destination's attempts at message `id`, waited for (bounded) until one succeeded.
    async fn attempts_until_success(&self, id: &str, destination: &str) -> Vec<Value> {
        let path = format!("/app/{}/attempt/msg/{id}", self.app);
        eventually(async || {
            let attempts: Vec<Value> = self
                .api
                .get_all(&path)
                .await
                .into_iter()
                .filter(|a| a["endpointId"] == destination)
                .collect();
            if attempts.iter().any(|a| a["status"] == 0) {
                Ok(attempts)
            } else {
                Err(format!(
                    "{id}: no successful attempt to {destination}: {attempts:?}"
                ))
            }
        })
        .await
    }

    /// Asserts that the delivery log shows each of `sent` acknowledged by the destination: a
    /// successful `200` attempt whose response is `ack(message)`; returns every attempt.
    async fn assert_acknowledged(
        &self,
        destination: &str,
        sent: &[Sent],
        ack: impl Fn(&Sent, &str) -> bool,
    ) -> Vec<Vec<Value>> {
        let mut all = Vec::new();
        for message in sent {
            let attempts = self.attempts_until_success(&message.id, destination).await;
            let success = attempts.iter().find(|a| a["status"] == 0).unwrap();
            assert_eq!(success["responseStatusCode"], 200, "{success}");
            let response = success["response"].as_str().unwrap();
            assert!(ack(message, response), "{}: ack {response:?}", message.id);
            all.push(attempts);
        }
        all
    }
}

/// Message `n`'s payload: non-ASCII text and a quote, so any re-encoding on the way shows in
/// the bytes.
fn payload(n: usize) -> Value {
    json!({"n": n, "text": "café ✓ \"q\""})
}

/// How many of `sent` are not among `arrived`.
fn missing(sent: &[Sent], arrived: &[Arrived]) -> usize {
    let ids: HashSet<&str> = arrived.iter().map(Arrived::id).collect();
    sent.iter().filter(|s| !ids.contains(s.id.as_str())).count()
}

/// Waits (bounded) until every one of `sent` is among what `read` returns (everything arrived
/// so far, each call); returns that.
async fn until_arrived(sent: &[Sent], mut read: impl AsyncFnMut() -> Vec<Arrived>) -> Vec<Arrived> {
    eventually(async || {
        let arrived = read().await;
        match missing(sent, &arrived) {
            0 => Ok(arrived),
            lost => Err(format!("{lost} of {} never arrived", sent.len())),
        }
    })
    .await
}

/// Asserts that everything that arrived was published, with the published bytes, verifying
/// with `secret` by the reference library, with the event type and ordering key; and that
/// every one of `sent` arrived at least once.
fn assert_arrived_verified(secret: &str, sent: &[Sent], arrived: &[Arrived]) {
    let reference = standardwebhooks::Webhook::new(secret).expect("a secret");
    for message in arrived {
        let id = message.id();
        let published = sent
            .iter()
            .find(|s| s.id == id)
            .unwrap_or_else(|| panic!("{id} was never published"));
        assert_eq!(
            message.body, published.body,
            "{id}: the published bytes, unchanged"
        );
        let mut headers = http::HeaderMap::new();
        for (name, value) in message.headers.iter() {
            if let (Ok(name), Ok(value)) = (
                http::HeaderName::try_from(name.to_ascii_lowercase()),
                http::HeaderValue::try_from(value.as_str()),
            ) {
                headers.insert(name, value);
            }
        }
        let checked = reference.verify(&message.body, &headers);
        assert!(
            checked.is_ok(),
            "{id}: standardwebhooks refused it: {checked:?}"
        );
        assert_eq!(message.header("event-type"), Some(EVENT_TYPE), "{id}");
        assert_eq!(
            message.header("ordering-key"),
            published.key.as_deref(),
            "{id}"
        );
    }
    assert_eq!(missing(sent, arrived), 0, "every published message arrived");
}

// ---------------------------------------------------------------------------------------------
// RabbitMQ.

/// The test's RabbitMQ, with a queue of its own (deleted by [`Rabbit::delete`]) that the
/// default exchange routes the queue's name to; what was taken from it so far.
struct Rabbit {
    url: String,
    channel: lapin::Channel,
    queue: String,
    taken: Mutex<Vec<Arrived>>,
    _connection: lapin::Connection,
}

impl Rabbit {
    async fn start(test: &str) -> Option<Self> {
        let url = service_url(test, "RABBITMQ")?;
        let connection = lapin::Connection::connect(&url, Default::default())
            .await
            .unwrap_or_else(|e| panic!("{test}: cannot reach RabbitMQ at {url}: {e}"));
        let channel = connection.create_channel().await.unwrap();
        let queue = unique("hookd-e2e-");
        channel
            .queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        Some(Self {
            url,
            channel,
            queue,
            taken: Mutex::default(),
            _connection: connection,
        })
    }

    /// The destination's config, publishing through `uri` to this queue (unroutable refused).
    fn config(&self, uri: &str) -> Value {
        json!({"uri": uri, "routingKey": self.queue, "mandatory": true})
    }

    /// Everything taken from the queue so far, after taking what waits there now.
    async fn arrived(&self) -> Vec<Arrived> {
        let options = BasicGetOptions { no_ack: true };
        while let Some(got) = self
            .channel
            .basic_get(self.queue.as_str().into(), options)
            .await
            .unwrap()
        {
            let table = got
                .delivery
                .properties
                .headers()
                .clone()
                .unwrap_or_default();
            let headers = table
                .inner()
                .iter()
                .map(|(name, value)| {
                    let AMQPValue::LongString(text) = value else {
                        panic!("{name} is not a long string: {value:?}");
                    };
                    (name.to_string(), text.to_string())
                })
                .collect();
            let body = got.delivery.data.clone();
            self.taken.lock().unwrap().push(Arrived { body, headers });
        }
        self.taken.lock().unwrap().clone()
    }

    async fn address(&self) -> SocketAddr {
        let rest = self.url.split_once("://").unwrap().1;
        let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
        let target = match host_port.contains(':') {
            true => host_port.to_owned(),
            false => format!("{host_port}:5672"),
        };
        tokio::net::lookup_host(target)
            .await
            .unwrap()
            .next()
            .unwrap()
    }

    /// The broker URL with its host and port replaced by `address` (a relay's).
    fn url_via(&self, address: SocketAddr) -> String {
        let (scheme, rest) = self.url.split_once("://").unwrap();
        let path_at = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(path_at);
        let user = authority
            .rsplit_once('@')
            .map(|(user, _)| format!("{user}@"));
        format!("{scheme}://{}{address}{path}", user.unwrap_or_default())
    }

    async fn delete(self) {
        self.channel
            .queue_delete(self.queue.as_str().into(), QueueDeleteOptions::default())
            .await
            .unwrap();
    }
}

/// What the RabbitMQ sink records as a message's acknowledgement.
fn rabbit_ack(sent: &Sent, response: &str) -> bool {
    response == format!("ack {}", sent.id)
}

/// A loopback TCP relay to a broker that can be taken down (every relayed connection cut,
/// every new one closed at once, as a stopped broker's host would) and brought back.
struct Relay {
    address: SocketAddr,
    down: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    listener: JoinHandle<()>,
}

impl Relay {
    async fn to(target: SocketAddr) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let address = listener.local_addr().unwrap();
        let down = Arc::new(AtomicBool::new(false));
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (is_down, held) = (down.clone(), links.clone());
        let listener = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if is_down.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                held.lock().unwrap().push(tokio::spawn(async move {
                    if let Ok(mut broker) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut broker).await;
                    }
                }));
            }
        });
        Self {
            address,
            down,
            links,
            listener,
        }
    }

    fn down(&self) {
        self.down.store(true, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    fn up(&self) {
        self.down.store(false, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.listener.abort();
        self.down();
    }
}

async fn rabbitmq_delivers_every_message_verified_and_acknowledged(run: Run, rabbit: Rabbit) {
    let destination = run
        .destination("rabbitMq", rabbit.config(&rabbit.url))
        .await;
    let secret = run.signing_secret(&destination).await;

    let sent = run.publish_range(0..N, true).await;

    let arrived = until_arrived(&sent, async || rabbit.arrived().await).await;
    assert_arrived_verified(&secret, &sent, &arrived);
    run.assert_acknowledged(&destination, &sent, rabbit_ack)
        .await;
    rabbit.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_gets_every_message_verified_and_acknowledged_on_sqlite() {
    let test = "rabbitmq_gets_every_message_verified_and_acknowledged_on_sqlite";
    let Some(rabbit) = Rabbit::start(test).await else {
        return;
    };
    let run = Run::sqlite(&[]).await;
    rabbitmq_delivers_every_message_verified_and_acknowledged(run, rabbit).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_gets_every_message_verified_and_acknowledged_on_postgres() {
    let test = "rabbitmq_gets_every_message_verified_and_acknowledged_on_postgres";
    let Some(rabbit) = Rabbit::start(test).await else {
        return;
    };
    let Some(run) = Run::postgres(test).await else {
        return;
    };
    rabbitmq_delivers_every_message_verified_and_acknowledged(run, rabbit).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_cut_off_mid_run_loses_nothing_once_it_is_back() {
    let test = "rabbitmq_cut_off_mid_run_loses_nothing_once_it_is_back";
    let Some(rabbit) = Rabbit::start(test).await else {
        return;
    };
    let run = Run::sqlite(&["--attempt-timeout", "2"]).await;
    let relay = Relay::to(rabbit.address().await).await;
    let destination = run
        .destination("rabbitMq", rabbit.config(&rabbit.url_via(relay.address)))
        .await;
    let secret = run.signing_secret(&destination).await;
    let before = run.publish_range(0..N / 2, false).await;
    until_arrived(&before, async || rabbit.arrived().await).await;

    // The broker goes away: the rest are published, and their first attempts fail.
    relay.down();
    let during = run.publish_range(N / 2..N, false).await;
    for message in &during {
        let path = format!("/app/{}/attempt/msg/{}", run.app, message.id);
        support::wait_until(&run.api, &path, |page| {
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["status"] == 2)
        })
        .await;
    }
    assert_eq!(
        missing(&during, &rabbit.arrived().await),
        during.len(),
        "nothing got through while the broker was away"
    );

    // It comes back; the first retry is due 5 s (+10 %) later, on hookd's clock.
    relay.up();
    run.time.set(PAST_FIRST_RETRY_MS);
    let sent: Vec<Sent> = before.into_iter().chain(during.iter().cloned()).collect();
    let arrived = until_arrived(&sent, async || rabbit.arrived().await).await;

    assert_arrived_verified(&secret, &sent, &arrived);
    let logs = run
        .assert_acknowledged(&destination, &during, rabbit_ack)
        .await;
    for attempts in logs {
        let failed = attempts.iter().find(|a| a["status"] == 2).unwrap();
        assert_eq!(failed["responseStatusCode"], 0, "{failed}");
    }
    rabbit.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_hookd_mid_run_loses_no_rabbitmq_message() {
    let test = "kill_9_of_hookd_mid_run_loses_no_rabbitmq_message";
    let Some(rabbit) = Rabbit::start(test).await else {
        return;
    };
    let flags = ["--lease", "4s"];
    let mut run = Run::sqlite(&flags).await;
    let destination = run
        .destination("rabbitMq", rabbit.config(&rabbit.url))
        .await;
    let secret = run.signing_secret(&destination).await;

    // SIGKILL once the first deliveries are in the queue, while publishing goes on: the
    // publisher keeps on until the kill stops hookd's API, however fast the machine.
    let mut sent = Vec::new();
    let publishing = async {
        for n in 0..MOST_BEFORE_KILL {
            match run.try_publish(n, None).await {
                Some(message) => sent.push(message),
                None => return,
            }
        }
    };
    let killer = async {
        eventually(async || match rabbit.arrived().await.len() {
            0 => Err("nothing arrived before the kill".to_owned()),
            _ => Ok(()),
        })
        .await;
        let pid = run.hookd.pid().to_string();
        let killed = Command::new("kill").args(["-KILL", &pid]).status();
        assert!(killed.unwrap().success(), "kill -9 hookd");
    };
    tokio::join!(publishing, killer);
    let before_kill = sent.len();
    assert!(
        before_kill < MOST_BEFORE_KILL,
        "hookd was killed mid-run, not after publishing all {MOST_BEFORE_KILL}"
    );
    run.restart_after_kill_9(&flags);
    // Past the lease of whatever the killed process had claimed, and past any first retry.
    run.time.set(PAST_FIRST_RETRY_MS);
    for n in before_kill..before_kill + N {
        sent.push(run.publish(n, None).await);
    }
    // A message hookd stored whose 202 the kill cut off counts too: everything hookd holds.
    let sent = run.stored_messages().await;
    assert!(
        sent.len() >= before_kill + N,
        "{} messages stored",
        sent.len()
    );

    let arrived = until_arrived(&sent, async || rabbit.arrived().await).await;
    assert_arrived_verified(&secret, &sent, &arrived);
    run.assert_acknowledged(&destination, &sent, rabbit_ack)
        .await;
    rabbit.delete().await;
}

/// A loopback address that accepts connections and never answers, counting them: a broker
/// that hangs, the worst case for whoever waits on it.
struct BlackHole {
    address: SocketAddr,
    accepted: Arc<AtomicUsize>,
    listener: JoinHandle<()>,
}

impl BlackHole {
    async fn start() -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let address = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let listener = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                held.push(socket);
            }
        });
        Self {
            address,
            accepted,
            listener,
        }
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_rabbitmq_broker_never_holds_up_an_http_endpoint() {
    let run = Run::sqlite(&["--attempt-timeout", "30"]).await;
    let hole = BlackHole::start().await;
    let receiver = Receiver::always(StatusCode::NO_CONTENT).await;
    run.api.endpoint(&run.app, &receiver.url).await;
    let uri = format!("amqp://guest:guest@{}/%2f", hole.address);
    let destination = run
        .destination("rabbitMq", json!({"uri": uri, "routingKey": "orders"}))
        .await;

    let sent = run.publish_range(0..N, true).await;

    // Every message reaches the HTTP endpoint while the broker's attempts hang for 30 s.
    receiver.wait_for(N).await;
    let received: HashSet<String> = receiver
        .requests()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert!(sent.iter().all(|s| received.contains(&s.id)));
    eventually(async || match hole.accepted.load(Ordering::SeqCst) {
        0 => Err("the destination was never tried".to_owned()),
        _ => Ok(()),
    })
    .await;
    let first = format!("/app/{}/attempt/msg/{}", run.app, sent[0].id);
    let attempts = run.api.get_all(&first).await;
    assert!(
        !attempts
            .iter()
            .any(|a| a["endpointId"] == destination.as_str()),
        "the destination's first attempt is still waiting on the broker: {attempts:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// What a consumer and an operator need from the API for a broker destination.

#[tokio::test]
async fn a_broker_destinations_signing_secret_is_shown_to_its_consumer() {
    let run = Run::sqlite(&[]).await;
    let config = json!({"uri": "amqp://guest:guest@127.0.0.1:5672/%2f", "routingKey": "orders"});
    let destination = run.destination("rabbitMq", config).await;
    let path = format!("/app/{}/destination/{destination}/secret", run.app);

    let (status, shown) = run.api.call(reqwest::Method::GET, &path, None, &[]).await;

    assert_eq!(status, 200, "{shown}");
    assert_eq!(
        shown["key"],
        run.signing_secret(&destination).await.as_str()
    );
}

#[tokio::test]
async fn a_destinations_delivery_log_is_listed_by_destination() {
    let cluster = rdkafka::mocking::MockCluster::new(1).expect("a mock cluster");
    cluster.create_topic("orders", 1, 1).unwrap();
    let run = Run::sqlite(&[]).await;
    let config = json!({"bootstrapServers": [cluster.bootstrap_servers()], "topic": "orders"});
    let destination = run.destination("kafka", config).await;
    let sent = run.publish(0, None).await;
    run.attempts_until_success(&sent.id, &destination).await;
    let path = format!("/app/{}/attempt/endpoint/{destination}", run.app);

    let (status, log) = run.api.call(reqwest::Method::GET, &path, None, &[]).await;

    assert_eq!(status, 200, "{log}");
    assert_eq!(log["data"][0]["msgId"], sent.id.as_str(), "{log}");
    assert_eq!(log["data"][0]["responseStatusCode"], 200, "{log}");
}

// ---------------------------------------------------------------------------------------------
// NATS JetStream.

/// The test's NATS server, with a stream of its own capturing one subject.
struct Nats {
    url: String,
    jetstream: async_nats::jetstream::Context,
    stream: async_nats::jetstream::stream::Stream,
    name: String,
    subject: String,
}

impl Nats {
    async fn start(test: &str) -> Option<Self> {
        let url = service_url(test, "NATS")?;
        let client = async_nats::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("{test}: cannot reach NATS at {url}: {e}"));
        let jetstream = async_nats::jetstream::new(client);
        let name = unique("HOOKD_E2E_");
        let subject = format!("hookd.e2e.{name}");
        let config = async_nats::jetstream::stream::Config {
            name: name.clone(),
            subjects: vec![subject.clone()],
            ..Default::default()
        };
        let stream = jetstream
            .create_stream(config)
            .await
            .unwrap_or_else(|e| panic!("{test}: cannot create a stream (JetStream on?): {e}"));
        Some(Self {
            url,
            jetstream,
            stream,
            name,
            subject,
        })
    }

    /// Every message the stream holds.
    async fn arrived(&self) -> Vec<Arrived> {
        let stored = self.stream.get_info().await.unwrap().state.messages;
        let mut arrived = Vec::new();
        for sequence in 1..=stored {
            let message = self.stream.get_raw_message(sequence).await.unwrap();
            let headers = message
                .headers
                .iter()
                .flat_map(|(name, values)| {
                    values
                        .iter()
                        .map(move |v| (name.to_string(), v.to_string()))
                })
                .collect();
            arrived.push(Arrived {
                body: message.payload.to_vec(),
                headers,
            });
        }
        arrived
    }

    async fn delete(self) {
        self.jetstream.delete_stream(&self.name).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_jetstream_gets_every_message_verified_and_acknowledged() {
    let test = "nats_jetstream_gets_every_message_verified_and_acknowledged";
    let Some(nats) = Nats::start(test).await else {
        return;
    };
    let run = Run::sqlite(&[]).await;
    let config = json!({"url": nats.url, "subject": nats.subject});
    let destination = run.destination("natsJetStream", config).await;
    let secret = run.signing_secret(&destination).await;

    let sent = run.publish_range(0..N, true).await;

    let arrived = until_arrived(&sent, async || nats.arrived().await).await;
    assert_arrived_verified(&secret, &sent, &arrived);
    run.assert_acknowledged(&destination, &sent, |_, ack| ack.contains(&nats.name))
        .await;
    nats.delete().await;
}

// ---------------------------------------------------------------------------------------------
// SQS, SNS and S3 on moto.

/// A `moto_server` on a free loopback port that checks signatures after its first three
/// calls (which make the IAM user and key hookd signs with); stopped when dropped, and by its
/// shell when this process ends however it ends (the shell waits on our end of a pipe).
struct Moto {
    shell: Child,
    port: u16,
    python: PathBuf,
    key: (String, String),
}

impl Moto {
    fn start(test: &str) -> Option<Self> {
        let server = moto_server(test)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .unwrap()
            .port();
        let shell = Command::new("sh")
            .args([
                "-c",
                r#""$0" -H 127.0.0.1 -p "$1" & pid=$!; read _; kill $pid; wait $pid"#,
            ])
            .arg(&server)
            .arg(port.to_string())
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "3")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh starts moto_server");
        let mut moto = Self {
            shell,
            port,
            python: server.with_file_name("python"),
            key: ("unchecked".into(), "unchecked".into()),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        let key = &moto.boto(json!([["auth"]]))[0];
        moto.key = (
            key["id"].as_str().unwrap().to_owned(),
            key["secret"].as_str().unwrap().to_owned(),
        );
        Some(moto)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Runs `ops` in boto3 (the sinks tests' helper), signed with the accepted key.
    fn boto(&self, ops: Value) -> Vec<Value> {
        let helper =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../hookd-sinks/tests/moto_helper.py");
        let output = Command::new(&self.python)
            .arg(helper)
            .arg(self.url())
            .arg(ops.to_string())
            .env("AWS_ACCESS_KEY_ID", &self.key.0)
            .env("AWS_SECRET_ACCESS_KEY", &self.key.1)
            .output()
            .expect("the moto helper runs");
        assert!(
            output.status.success(),
            "moto_helper.py {ops} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("the helper prints JSON")
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        drop(self.shell.stdin.take());
        let _ = self.shell.wait();
    }
}

/// `moto_server`'s path from `HOOKD_TEST_MOTO`, or `None` (after saying so).
fn moto_server(test: &str) -> Option<PathBuf> {
    let configured = std::env::var("HOOKD_TEST_MOTO").unwrap_or_default();
    let found = match configured.as_str() {
        "" => None,
        "1" => std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join("moto_server"))
            .find(|path| path.is_file()),
        path => Some(PathBuf::from(path)),
    };
    if found.is_none() {
        assert!(
            std::env::var("HOOKD_TEST_REQUIRE_MOTO").as_deref() != Ok("1"),
            "{test}: HOOKD_TEST_MOTO={configured:?} names no moto_server, and \
             HOOKD_TEST_REQUIRE_MOTO=1 requires it"
        );
        skipped(test, "HOOKD_TEST_MOTO not set");
    }
    found
}

/// One message read from an SQS queue: as [`Arrived`], and its system attributes.
fn sqs_arrived(message: &Value) -> (Arrived, Value) {
    let attributes: BTreeMap<String, String> =
        serde_json::from_value(message["attributes"].clone()).unwrap();
    let arrived = Arrived {
        body: message["body"].as_str().unwrap().as_bytes().to_vec(),
        headers: attributes.into_iter().collect(),
    };
    (arrived, message["system"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_fifo_gets_every_message_verified_in_order_per_key() {
    let test = "sqs_fifo_gets_every_message_verified_in_order_per_key";
    let Some(moto) = Moto::start(test) else {
        return;
    };
    let queue = moto.boto(json!([["queue", "orders.fifo"]]))[0]
        .as_str()
        .unwrap()
        .to_owned();
    let run = Run::sqlite(&[]).await;
    let config = json!({
        "queueUrl": queue, "region": "us-east-1", "endpointUrl": moto.url(),
        "accessKeyId": moto.key.0, "secretAccessKey": moto.key.1,
    });
    let destination = run.destination("sqs", config).await;
    let secret = run.signing_secret(&destination).await;

    let sent = run.publish_range(0..N, true).await;

    // Read in the queue's order; each read deletes what it took.
    let mut taken = Vec::new();
    let arrived = until_arrived(&sent, async || {
        taken.extend(
            moto.boto(json!([["receive", queue]]))[0]
                .as_array()
                .unwrap()
                .iter()
                .map(sqs_arrived),
        );
        taken.iter().map(|(arrived, _)| arrived.clone()).collect()
    })
    .await;
    assert_arrived_verified(&secret, &sent, &arrived);
    for (message, system) in &taken {
        assert_eq!(
            system["MessageGroupId"].as_str(),
            message.header("ordering-key"),
            "the ordering key is the message group"
        );
    }
    for key in KEYS {
        let order: Vec<usize> = taken
            .iter()
            .filter(|(message, _)| message.header("ordering-key") == Some(key))
            .map(|(message, _)| sent.iter().position(|s| s.id == message.id()).unwrap())
            .collect();
        assert!(
            order.windows(2).all(|pair| pair[0] < pair[1]),
            "{key} arrived out of publish order: {order:?}"
        );
    }
    run.assert_acknowledged(&destination, &sent, |_, ack| ack.contains("messageId"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sns_gets_every_message_verified_through_a_subscribed_queue() {
    let test = "sns_gets_every_message_verified_through_a_subscribed_queue";
    let Some(moto) = Moto::start(test) else {
        return;
    };
    let topic = moto.boto(json!([["topic", "orders"]]))[0].clone();
    let queue = topic["queue"].as_str().unwrap().to_owned();
    let run = Run::sqlite(&[]).await;
    let config = json!({
        "topicArn": topic["arn"], "region": "us-east-1", "endpointUrl": moto.url(),
        "accessKeyId": moto.key.0, "secretAccessKey": moto.key.1,
    });
    let destination = run.destination("sns", config).await;
    let secret = run.signing_secret(&destination).await;

    let sent = run.publish_range(0..N, false).await;

    let mut taken = Vec::new();
    let arrived = until_arrived(&sent, async || {
        let read = moto.boto(json!([["receive", queue]]));
        taken.extend(read[0].as_array().unwrap().iter().map(|m| sqs_arrived(m).0));
        taken.clone()
    })
    .await;
    assert_arrived_verified(&secret, &sent, &arrived);
    run.assert_acknowledged(&destination, &sent, |_, ack| ack.contains("messageId"))
        .await;
}

/// One line of an S3 batch object, its payload kept as the bytes written.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct S3Line {
    event_type: String,
    headers: BTreeMap<String, String>,
    payload: Box<serde_json::value::RawValue>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amazon_s3_gets_every_message_verified_in_batch_objects() {
    let test = "amazon_s3_gets_every_message_verified_in_batch_objects";
    let Some(moto) = Moto::start(test) else {
        return;
    };
    let bucket = unique("hookd-e2e-").to_ascii_lowercase().replace('_', "-");
    moto.boto(json!([["bucket", bucket]]));
    let run = Run::sqlite(&[]).await;
    let path = format!("/app/{}/destination", run.app);
    let body = json!({
        "type": "amazonS3", "batchSize": 10, "maxWaitSecs": 1,
        "config": {
            "bucket": bucket, "region": "us-east-1", "endpointUrl": moto.url(),
            "accessKeyId": moto.key.0, "secretAccessKey": moto.key.1,
        },
    });
    let (status, made) = run.api.post(&path, body).await.unwrap();
    assert_eq!(status, 201, "{made}");
    let destination = made["id"].as_str().unwrap().to_owned();
    let secret = run.signing_secret(&destination).await;

    let sent = run.publish_range(0..N, false).await;

    let mut objects = 0;
    let arrived = until_arrived(&sent, async || {
        let found = moto.boto(json!([["objects", bucket]]))[0].clone();
        let found = found.as_object().unwrap();
        objects = found.len();
        let prefix = format!("{}/{destination}/", run.app);
        found
            .iter()
            .inspect(|(key, _)| assert!(key.starts_with(&prefix), "{key} under {prefix}"))
            .flat_map(|(_, object)| {
                let body = object["body"].as_str().unwrap().to_owned();
                body.lines()
                    .map(|line| {
                        let line: S3Line = serde_json::from_str(line).expect("a JSON line");
                        let mut headers: Vec<_> = line.headers.into_iter().collect();
                        headers.push(("event-type".into(), line.event_type));
                        Arrived {
                            body: line.payload.get().as_bytes().to_vec(),
                            headers,
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    })
    .await;
    assert_arrived_verified(&secret, &sent, &arrived);
    assert!(
        objects < N,
        "{objects} objects for {N} messages: they were batched"
    );
    run.assert_acknowledged(&destination, &sent, |_, ack| ack.contains(".jsonl"))
        .await;
}

// ---------------------------------------------------------------------------------------------
// Kafka on librdkafka's mock cluster.

const PARTITIONS: i32 = 3;

/// Every record of `topic` on the cluster at `brokers`, by partition, in offset order.
async fn kafka_records(
    brokers: &[String],
    topic: &str,
) -> Vec<(i32, rskafka::record::RecordAndOffset)> {
    use rskafka::client::partition::UnknownTopicHandling;
    let client = rskafka::client::ClientBuilder::new(brokers.to_vec())
        .build()
        .await
        .unwrap();
    let mut all = Vec::new();
    for partition in 0..PARTITIONS {
        let reader = client
            .partition_client(topic, partition, UnknownTopicHandling::Error)
            .await
            .unwrap();
        let mut next = 0;
        loop {
            let (fetched, high_watermark) =
                reader.fetch_records(next, 1..1_000_000, 100).await.unwrap();
            if let Some(last) = fetched.last() {
                next = last.offset + 1;
            }
            all.extend(fetched.into_iter().map(|record| (partition, record)));
            if next >= high_watermark {
                break;
            }
        }
    }
    all
}

fn kafka_arrived(record: &rskafka::record::Record) -> Arrived {
    let headers = record
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), String::from_utf8(value.clone()).unwrap()))
        .collect();
    Arrived {
        body: record.value.clone().unwrap_or_default(),
        headers,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_gets_every_message_verified_keyed_by_ordering_key() {
    let cluster = rdkafka::mocking::MockCluster::new(1).expect("a mock cluster");
    let topic = unique("hookd-e2e-");
    cluster.create_topic(&topic, PARTITIONS, 1).unwrap();
    let brokers: Vec<String> = cluster
        .bootstrap_servers()
        .split(',')
        .map(str::to_owned)
        .collect();
    let run = Run::sqlite(&[]).await;
    let config = json!({"bootstrapServers": brokers, "topic": topic});
    let destination = run.destination("kafka", config).await;
    let secret = run.signing_secret(&destination).await;

    let sent = run.publish_range(0..N, true).await;

    let mut records = Vec::new();
    let arrived = until_arrived(&sent, async || {
        records = kafka_records(&brokers, &topic).await;
        records
            .iter()
            .map(|(_, r)| kafka_arrived(&r.record))
            .collect()
    })
    .await;
    assert_arrived_verified(&secret, &sent, &arrived);
    for key in KEYS {
        let of_key: Vec<(i32, usize)> = records
            .iter()
            .filter(|(_, r)| r.record.key.as_deref() == Some(key.as_bytes()))
            .map(|(partition, r)| {
                let id = kafka_arrived(&r.record).id().to_owned();
                (*partition, sent.iter().position(|s| s.id == id).unwrap())
            })
            .collect();
        let expected = sent
            .iter()
            .filter(|s| s.key.as_deref() == Some(key))
            .count();
        assert!(of_key.len() >= expected, "{key}: {of_key:?}");
        assert!(
            of_key
                .windows(2)
                .all(|p| p[0].0 == p[1].0 && p[0].1 < p[1].1),
            "{key}: one partition, in publish order: {of_key:?}"
        );
    }
    for (_, record) in &records {
        let arrived = kafka_arrived(&record.record);
        assert_eq!(
            record.record.key.as_deref(),
            arrived.header("ordering-key").map(str::as_bytes),
            "the record's key is the ordering key"
        );
    }
    run.assert_acknowledged(&destination, &sent, |_, ack| ack.contains("offset"))
        .await;
}
