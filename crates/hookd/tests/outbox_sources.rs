//! Outbox sources end to end: the real binary relaying `hookd_outbox` tables in producers'
//! own databases (PostgreSQL, MySQL/MariaDB and SQLite, each separate from hookd's SQLite
//! file) to a real receiver. A transaction that commits is delivered once, one that rolls back
//! never; `kill -9` of hookd at random moments during a stream of commits loses nothing and
//! makes no second message; the producer's database going away mid-stream (a PostgreSQL or
//! MySQL server cut off; an SQLite file's write lock held past the relay's busy timeout)
//! loses nothing, and `/metrics` says it is down meanwhile. PostgreSQL and MySQL tests are skipped without
//! `HOOKD_TEST_POSTGRES_URL` / `HOOKD_TEST_MYSQL_URL`.

mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use hookd_outbox::Event;
use hookd_sources::testing::Producer;
use support::{Api, Hookd};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const TOKEN: &str = "outbox-sources-test-admin-token";

hookd_sources::on_every_kind!(
    a_commit_is_delivered_once_and_a_rollback_never,
    kill_9_during_a_stream_of_commits_loses_nothing_and_sends_nothing_twice,
);

/// hookd on its own SQLite file in `dir`, relaying `source_url` as source `orders`.
fn serve(dir: &tempfile::TempDir, source_url: &str) -> Hookd {
    let database = format!("sqlite://{}", dir.path().join("hookd.db").display());
    let source = format!("orders={source_url}");
    Hookd::serve_local(&database, TOKEN, &["--outbox-source", &source])
}

fn event(app: &str, n: usize) -> Event {
    Event::from_json_text(app, "order.shipped", format!(r#"{{"n": {n}}}"#))
}

/// The `n` of each of `app`'s messages.
async fn published(api: &Api, app: &str) -> Vec<u64> {
    let messages = api.get_all(&format!("/app/{app}/msg")).await;
    messages
        .iter()
        .map(|message| message["payload"]["n"].as_u64().expect("a payload with n"))
        .collect()
}

/// Commits rows `rows` for `app`, one per transaction, `pause` apart, in a task of its own.
fn commit_stream(
    producer: &Arc<Producer>,
    app: &str,
    rows: std::ops::Range<usize>,
    pause: Duration,
) -> tokio::task::JoinHandle<()> {
    let (producer, app) = (producer.clone(), app.to_owned());
    tokio::spawn(async move {
        for n in rows {
            producer.commit(&[event(&app, n)]).await;
            tokio::time::sleep(pause).await;
        }
    })
}

/// Waits (bounded) until `app` has `count` messages or more; returns their `n`s.
async fn until_published(api: &Api, app: &str, count: usize) -> Vec<u64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let published = published(api, app).await;
        if published.len() >= count {
            return published;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: {} of {count} messages",
            published.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asserts that `published` holds each of `0..count` exactly once.
fn each_once(published: &[u64], count: usize) {
    let distinct: BTreeSet<u64> = published.iter().copied().collect();
    assert_eq!(distinct.len(), published.len(), "a row published twice");
    assert_eq!(distinct, (0..count as u64).collect(), "a row lost");
}

async fn a_commit_is_delivered_once_and_a_rollback_never(producer: Producer) {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::always(StatusCode::OK).await;
    let hookd = serve(&dir, &producer.url);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&receiver.url).await;

    producer.write(&[event(&app, 1)], false).await;
    producer.commit(&[event(&app, 2)]).await;

    receiver.wait_for(1).await;
    assert_eq!(until_published(&api, &app, 1).await, [2]);
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1, "exactly one delivery");
    assert_eq!(
        &requests[0].body[..],
        br#"{"n": 2}"#,
        "the producer's bytes"
    );
    assert_eq!(producer.rows().await, [], "the row is removed once relayed");
}

/// A few hundred milliseconds, different on every call.
fn random_pause() -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    Duration::from_millis(100 + u64::from(nanos % 500))
}

async fn kill_9_during_a_stream_of_commits_loses_nothing_and_sends_nothing_twice(
    producer: Producer,
) {
    const ROWS: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::always(StatusCode::OK).await;
    let mut hookd = serve(&dir, &producer.url);
    let app = Api::new(&hookd, TOKEN)
        .app_with_endpoint(&receiver.url)
        .await;
    let producer = Arc::new(producer);
    let stream = commit_stream(&producer, &app, 0..ROWS, Duration::from_millis(5));

    for _ in 0..3 {
        let pause = random_pause();
        tokio::time::sleep(pause).await;
        hookd.kill_hard();
        println!("killed hookd after {pause:?}");
        hookd = serve(&dir, &producer.url);
    }
    stream.await.unwrap();

    let api = Api::new(&hookd, TOKEN);
    each_once(&until_published(&api, &app, ROWS).await, ROWS);
    assert_eq!(producer.rows().await, []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_source_down_mid_stream_loses_nothing() {
    if let Some(producer) = Producer::postgres("outbox_sources::postgres_down").await {
        source_down_mid_stream_loses_nothing(producer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_source_down_mid_stream_loses_nothing() {
    if let Some(producer) = Producer::mysql("outbox_sources::mysql_down").await {
        source_down_mid_stream_loses_nothing(producer).await;
    }
}

/// hookd reaches the producer's server through a forwarder the test cuts for two seconds
/// mid-stream: every connection is closed and new ones are closed at once, as when the server
/// stops. The producer keeps committing (directly) meanwhile.
async fn source_down_mid_stream_loses_nothing(producer: Producer) {
    const ROWS: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::always(StatusCode::OK).await;
    let (proxy_url, link) = forwarded(&producer.url).await;
    let hookd = serve(&dir, &proxy_url);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&receiver.url).await;
    let producer = Arc::new(producer);
    let stream = commit_stream(&producer, &app, 0..ROWS, Duration::from_millis(10));

    tokio::time::sleep(Duration::from_millis(500)).await;
    link.send(false).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let down = metric(&hookd, r#"hookd_outbox_source_up{source="orders"}"#).await;
    link.send(true).unwrap();
    stream.await.unwrap();

    assert_eq!(down, Some(0.0), "/metrics says the source is down");
    each_once(&until_published(&api, &app, ROWS).await, ROWS);
    assert_eq!(producer.rows().await, []);
    let up = metric(&hookd, r#"hookd_outbox_source_up{source="orders"}"#).await;
    assert_eq!(up, Some(1.0));
}

/// An SQLite file cannot go down the way a server can: here the application holds its write
/// lock for longer than the relay's busy timeout (5 s) just after committing rows, so the
/// relay publishes them and then cannot remove them, and takes them again until it can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_source_write_locked_mid_stream_loses_nothing() {
    const ROWS: usize = 200;
    let producer = Arc::new(Producer::sqlite().await);
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::always(StatusCode::OK).await;
    let hookd = serve(&dir, &producer.url);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&receiver.url).await;
    commit_stream(&producer, &app, 0..ROWS / 2, Duration::from_millis(2))
        .await
        .unwrap();

    let (path, burst_app) = (
        producer.url.strip_prefix("sqlite://").unwrap().to_owned(),
        app.clone(),
    );
    let (locked, is_locked) = std::sync::mpsc::channel();
    let application = std::thread::spawn(move || {
        let mut conn = rusqlite::Connection::open(path).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        let tx = conn.transaction().unwrap();
        for n in ROWS / 2..ROWS / 2 + 50 {
            event(&burst_app, n).to_source().insert_sqlite(&tx).unwrap();
        }
        tx.commit().unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked.send(()).unwrap();
        std::thread::sleep(Duration::from_secs(7));
        conn.execute_batch("COMMIT").unwrap();
    });
    is_locked.recv().unwrap();
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    let down = metric(&hookd, r#"hookd_outbox_source_up{source="orders"}"#).await;
    tokio::task::spawn_blocking(move || application.join().unwrap())
        .await
        .unwrap();
    commit_stream(
        &producer,
        &app,
        ROWS / 2 + 50..ROWS,
        Duration::from_millis(2),
    )
    .await
    .unwrap();

    assert_eq!(down, Some(0.0), "/metrics says the source is down");
    each_once(&until_published(&api, &app, ROWS).await, ROWS);
    assert_eq!(producer.rows().await, []);
}

/// A metric's value on hookd's `/metrics`.
async fn metric(hookd: &Hookd, series: &str) -> Option<f64> {
    let text = reqwest::get(format!("{}/metrics", hookd.base_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

/// `url` with its server reached through a forwarder on loopback, and the switch that cuts
/// (`false`) and restores (`true`) it.
async fn forwarded(url: &str) -> (String, watch::Sender<bool>) {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, rest) = rest.split_once('@').unwrap();
    let (server, path) = rest.split_once('/').unwrap();
    let target: SocketAddr = server.parse().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (link, up) = watch::channel(true);
    tokio::spawn(async move {
        loop {
            let Ok((inbound, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(forward(inbound, target, up.clone()));
        }
    });
    (format!("{scheme}://{user}@{address}/{path}"), link)
}

/// Forwards one connection while the link is up.
async fn forward(mut inbound: TcpStream, target: SocketAddr, mut up: watch::Receiver<bool>) {
    if !*up.borrow() {
        return;
    }
    let Ok(mut outbound) = TcpStream::connect(target).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
        _ = up.wait_for(|up| !*up) => {}
    }
}
