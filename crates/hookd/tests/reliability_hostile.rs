//! Promise: hostile receivers cannot hurt hookd or the other endpoints. A receiver that never
//! answers, one that trickles its answer a byte a second, one that answers a 1 GiB body, one
//! that redirects to 127.0.0.1, one that answers 410 and one that answers 429 with
//! `Retry-After` each get the outcome the delivery rules prescribe, recorded in the attempt log;
//! hookd's memory stays flat (it never buffers the 1 GiB); a healthy endpoint gets every
//! message meanwhile.
//!
//! The hostile receivers are raw TCP servers so that they can misbehave below HTTP. Attempts
//! time out after 1 s (`--attempt-timeout 1`) so the suite stays fast.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use hookd_core::Timestamp;
use hookd_engine::testing::{Receiver, read_request};
use serde_json::{Value, json};
use support::{Api, Hookd};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

const TOKEN: &str = "hostile-test-admin-token";
const GIB: u64 = 1 << 30;

/// How a raw receiver misbehaves once it has read a request.
#[derive(Clone)]
enum Behaviour {
    /// Holds the connection open and never writes a byte.
    Silent,
    /// Writes a valid response one byte a second.
    Trickle,
    /// Answers 200 with a 1 GiB body, written as fast as hookd reads it.
    HugeBody,
    /// Writes this response and closes.
    Canned(String),
}

/// A raw TCP receiver: counts requests, and bytes of body it managed to write.
struct RawReceiver {
    url: String,
    requests: Arc<AtomicUsize>,
    body_bytes_written: Arc<AtomicU64>,
}

impl RawReceiver {
    async fn start(behaviour: Behaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let body_bytes_written = Arc::new(AtomicU64::new(0));
        let (count, written) = (requests.clone(), body_bytes_written.clone());
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let (behaviour, count, written) =
                    (behaviour.clone(), count.clone(), written.clone());
                tokio::spawn(async move {
                    let mut stream = stream;
                    if read_request(&mut stream).await.is_some() {
                        count.fetch_add(1, Ordering::SeqCst);
                        let _ = misbehave(stream, behaviour, &written).await;
                    }
                });
            }
        });
        Self {
            url,
            requests,
            body_bytes_written,
        }
    }
}

async fn misbehave(
    mut stream: TcpStream,
    behaviour: Behaviour,
    written: &AtomicU64,
) -> std::io::Result<()> {
    match behaviour {
        Behaviour::Silent => {
            tokio::time::sleep(Duration::from_secs(120)).await;
        }
        Behaviour::Trickle => {
            for byte in b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok" {
                stream.write_all(&[*byte]).await?;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        Behaviour::HugeBody => {
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {GIB}\r\n\r\n");
            stream.write_all(head.as_bytes()).await?;
            let chunk = vec![b'x'; 64 * 1024];
            while written.load(Ordering::SeqCst) < GIB {
                stream.write_all(&chunk).await?;
                written.fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
        }
        Behaviour::Canned(response) => {
            stream.write_all(response.as_bytes()).await?;
            stream.shutdown().await?;
        }
    }
    Ok(())
}

/// A response with `status`, extra header lines and an empty body, closing the connection.
fn canned(status: &str, headers: &str) -> Behaviour {
    Behaviour::Canned(format!(
        "HTTP/1.1 {status}\r\n{headers}content-length: 0\r\nconnection: close\r\n\r\n"
    ))
}

/// Publishes one message to `app`; returns its id.
async fn publish(api: &Api, app: &str) -> String {
    let (status, message) = api
        .post(
            &format!("/app/{app}/msg"),
            json!({"eventType": "a.b", "payload": {"x": 1}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 202, "{message}");
    message["id"].as_str().unwrap().to_owned()
}

/// Waits (bounded) for the first attempt of `msg` in `app`, and returns it.
async fn first_attempt(api: &Api, app: &str, msg: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let attempts = api.get(&format!("/app/{app}/attempt/msg/{msg}")).await;
        if let Some(first) = attempts["data"].as_array().and_then(|d| d.last()) {
            return first.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no attempt of {msg} recorded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One hostile receiver with its own application and endpoint.
struct Hostile {
    receiver: RawReceiver,
    app: String,
}

impl Hostile {
    async fn new(api: &Api, behaviour: Behaviour) -> Self {
        let receiver = RawReceiver::start(behaviour).await;
        let app = api.app_with_endpoint(&receiver.url).await;
        Self { receiver, app }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_receivers_get_their_rightful_outcome_and_hurt_nobody() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(
        &database,
        TOKEN,
        &["--attempt-timeout", "1", "--retry-schedule", "0,1m"],
    );
    let api = Api::new(&hookd, TOKEN);
    let healthy = Receiver::always(StatusCode::OK).await;
    let healthy_app = api.app_with_endpoint(&healthy.url).await;
    // Warm up (connection pools, caches, allocator) before taking the baseline.
    for _ in 0..20 {
        publish(&api, &healthy_app).await;
    }
    healthy.wait_for(20).await;
    let baseline_kib = hookd.rss_kib();

    let redirect_target = Receiver::always(StatusCode::OK).await;
    let silent = Hostile::new(&api, Behaviour::Silent).await;
    let trickle = Hostile::new(&api, Behaviour::Trickle).await;
    let huge = Hostile::new(&api, Behaviour::HugeBody).await;
    let redirect = Hostile::new(
        &api,
        canned(
            "302 Found",
            &format!("location: {}\r\n", redirect_target.url),
        ),
    )
    .await;
    let gone = Hostile::new(&api, canned("410 Gone", "")).await;
    let slow_down = Hostile::new(
        &api,
        canned("429 Too Many Requests", "retry-after: 7200\r\n"),
    )
    .await;
    let failing_later = Hostile::new(
        &api,
        canned("500 Internal Server Error", "retry-after: 600\r\n"),
    )
    .await;

    // Every hostile receiver gets messages while the healthy one keeps receiving.
    let mut sent = Vec::new();
    for (hostile, messages) in [
        (&silent, 3),
        (&trickle, 3),
        (&huge, 3),
        (&redirect, 1),
        (&gone, 1),
        (&slow_down, 1),
        (&failing_later, 1),
    ] {
        for _ in 0..messages {
            sent.push((hostile.app.clone(), publish(&api, &hostile.app).await));
        }
    }
    let mut peak_kib = baseline_kib;
    for _ in 0..50 {
        publish(&api, &healthy_app).await;
        peak_kib = peak_kib.max(hookd.rss_kib());
    }
    healthy.wait_for(70).await;

    for (app, msg) in &sent {
        first_attempt(&api, app, msg).await;
        peak_kib = peak_kib.max(hookd.rss_kib());
    }

    let outcome = |hostile: &Hostile, index: usize| {
        let app = hostile.app.clone();
        let msg = sent
            .iter()
            .filter(|(a, _)| *a == app)
            .nth(index)
            .unwrap()
            .1
            .clone();
        let api = api.clone();
        async move { first_attempt(&api, &app, &msg).await }
    };
    for hostile in [&silent, &trickle] {
        let attempt = outcome(hostile, 0).await;
        assert_eq!(
            (
                attempt["responseStatusCode"].clone(),
                attempt["status"].clone()
            ),
            (json!(0), json!(2)),
            "{attempt}"
        );
        assert!(
            attempt["response"].as_str().unwrap().contains("timed out"),
            "{attempt}"
        );
    }

    let attempt = outcome(&huge, 0).await;
    assert_eq!(attempt["responseStatusCode"], 200, "{attempt}");
    assert_eq!(attempt["status"], 0, "2xx is success; the rest is not read");
    assert_eq!(attempt["response"].as_str().unwrap().len(), 64 * 1024);
    let written = huge.receiver.body_bytes_written.load(Ordering::SeqCst);
    assert!(
        written < GIB / 8,
        "hookd stopped reading after its prefix; the receiver pushed {written} bytes in all"
    );

    let attempt = outcome(&redirect, 0).await;
    assert_eq!(
        (
            attempt["responseStatusCode"].clone(),
            attempt["status"].clone()
        ),
        (json!(302), json!(2)),
        "a 3xx is a failed attempt: {attempt}"
    );
    assert_eq!(redirect_target.count(), 0, "redirects are never followed");

    let attempt = outcome(&gone, 0).await;
    assert_eq!(attempt["responseStatusCode"], 410, "{attempt}");
    let endpoint = &api.get(&format!("/app/{}/endpoint", gone.app)).await["data"][0];
    assert_eq!(
        endpoint["disabled"], true,
        "410 disables at once: {endpoint}"
    );
    let after = publish(&api, &gone.app).await;
    let destinations = api
        .get(&format!("/app/{}/msg/{after}/endpoint", gone.app))
        .await;
    assert_eq!(
        destinations["data"],
        json!([]),
        "nothing more is queued for a 410 endpoint"
    );
    assert_eq!(gone.receiver.requests.load(Ordering::SeqCst), 1);

    // When the delivery of `hostile`'s first message is tried again, after an answer of
    // `status`: a `Retry-After` longer than the 1 minute schedule wins, on any failed answer.
    let retried = async |hostile: &Hostile, status: u16| {
        let attempt = outcome(hostile, 0).await;
        assert_eq!(attempt["responseStatusCode"], status, "{attempt}");
        let msg = &sent.iter().find(|(a, _)| *a == hostile.app).unwrap().1;
        let destination = &api
            .get(&format!("/app/{}/msg/{msg}/endpoint", hostile.app))
            .await["data"][0];
        let tried_at = Timestamp::parse_rfc3339(attempt["timestamp"].as_str().unwrap()).unwrap();
        let next = Timestamp::parse_rfc3339(destination["nextAttempt"].as_str().unwrap()).unwrap();
        (
            tried_at,
            next,
            format!("tried {attempt}, next {destination}"),
        )
    };
    let (tried_at, next, seen) = retried(&slow_down, 429).await;
    assert!(
        next >= tried_at.plus(Duration::from_secs(7200 - 5)),
        "a 429's Retry-After 7200: {seen}"
    );
    let (tried_at, next, seen) = retried(&failing_later, 500).await;
    assert!(
        next >= tried_at.plus(Duration::from_secs(600 - 5)),
        "a 500's Retry-After 600: {seen}"
    );

    eprintln!(
        "hookd RSS {baseline_kib} KiB before the hostile receivers, {peak_kib} KiB at the peak; \
         the 1 GiB receiver pushed {written} bytes in all"
    );
    let growth_mib = peak_kib.saturating_sub(baseline_kib) / 1024;
    assert!(
        growth_mib < 64,
        "hookd's memory stayed flat: {baseline_kib} KiB before, {peak_kib} KiB at the peak"
    );
}
