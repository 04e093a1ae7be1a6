//! Promise: one client's flood of connections keeps no other client from an answer. From
//! 127.0.0.2, hundreds of connections hold hookd's slots the cheap ways (one request, then half
//! of the next head, kept open; or nothing at all, or half a first head) and reconnect as soon
//! as hookd closes them, for [`FLOOD`]. Meanwhile, from 127.0.0.1, `/api/v1/health` and an
//! authenticated publish, each on a new connection, must keep answering within [`PROMPTLY`].
//!
//! hookd runs with its connection settings scaled down (`--max-connections 256`,
//! `--max-connections-per-client 128`) so that a flood the size of the limit stays cheap for
//! the test machine; the header timeout keeps its default (30 s, longer than the flood), so
//! only the per-client cap and the first-request deadline hold the flood back. With
//! `--max-connections-per-client 0` the held connections fill the limit and the probes wait
//! for the header timeout.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use support::{Api, Hookd};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

const TOKEN: &str = "connections-test-admin-token";

/// How long the flood lasts.
const FLOOD: Duration = Duration::from_secs(20);
/// How long the flood has to fill its slots before the probes start.
const RAMP_UP: Duration = Duration::from_secs(3);
/// The bound on each probe's answer, new connection included: generous for a loaded 2-core
/// machine, far below the 30 s header timeout that freed slots before the cap.
const PROMPTLY: Duration = Duration::from_secs(5);
/// Connections of each kind the flood keeps open (or reopens) at once.
const HELD: usize = 300;
const UNUSED: usize = 300;
/// A flood connection's pause before it reconnects, so that the test's own loop stays bounded.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

/// Where the flood comes from: loopback is all of 127.0.0.0/8, and hookd counts per address.
const FLOODER: [u8; 4] = [127, 0, 0, 2];

const HEALTH: &[u8] = b"GET /api/v1/health HTTP/1.1\r\nhost: hookd\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clients_flood_keeps_no_other_client_from_an_answer() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(
        &database,
        TOKEN,
        &[
            "--max-connections",
            "256",
            "--max-connections-per-client",
            "128",
            "--first-request-timeout",
            "2",
        ],
    );
    let address: SocketAddr = hookd
        .base_url
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let api = Api::new(&hookd, TOKEN);
    let (status, app) = api.post("/app", json!({"name": "probe"})).await.unwrap();
    assert_eq!(status, 201, "{app}");
    let app = app["id"].as_str().unwrap().to_owned();

    let flood = Flood::start(address);
    tokio::time::sleep(RAMP_UP).await;
    let probes = probe_until(&hookd, &app, flood.end).await;
    let opened = flood.finish().await;

    assert!(
        opened.held_at_once >= 100,
        "the flood never held most of its cap's worth of connections: {opened:?}"
    );
    assert!(
        opened.total > 2 * (HELD + UNUSED),
        "the flood did not keep reconnecting: {opened:?}"
    );
    assert!(probes.answered >= 20, "too few probes: {probes:?}");
    assert!(
        probes.slowest < PROMPTLY,
        "a probe waited {:?} for its answer during the flood: {probes:?}",
        probes.slowest
    );
    eprintln!("flood: {opened:?}; probes: {probes:?}");
}

/// The probes' outcome: how many answered, and the slowest answer.
#[derive(Debug, Default)]
struct Probes {
    answered: usize,
    slowest: Duration,
}

/// Until `end`, asks for `/api/v1/health` every 250 ms and publishes to `app` every second,
/// each on a new connection from 127.0.0.1; panics on an answer that is not a success or
/// comes later than [`PROMPTLY`].
async fn probe_until(hookd: &Hookd, app: &str, end: Instant) -> Probes {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(PROMPTLY)
        .build()
        .unwrap();
    let health = format!("{}/api/v1/health", hookd.base_url);
    let publish = format!("{}/api/v1/app/{app}/msg", hookd.base_url);
    let mut probes = Probes::default();
    let mut round = 0u32;
    while Instant::now() < end {
        let started = Instant::now();
        let request = match round % 4 {
            0 => client.post(&publish).bearer_auth(TOKEN).json(&json!({
                "eventType": "probe.sent",
                "payload": {"round": round},
            })),
            _ => client.get(&health),
        };
        let response = request.send().await;
        let took = started.elapsed();
        let status = response
            .unwrap_or_else(|e| panic!("probe {round} failed after {took:?}: {e}"))
            .status();
        assert!(status.is_success(), "probe {round} answered {status}");
        probes.answered += 1;
        probes.slowest = probes.slowest.max(took);
        round += 1;
        tokio::time::sleep(Duration::from_millis(250).saturating_sub(took)).await;
    }
    probes
}

/// What the flood did: connections opened in all, and the most held open at once after hookd
/// answered their first request (the connections it was serving).
#[derive(Debug, Default)]
struct Opened {
    total: usize,
    held_at_once: usize,
}

/// The flood's connections from [`FLOODER`], each task reconnecting until `end`.
struct Flood {
    end: Instant,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    counts: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    total: AtomicUsize,
    held_now: AtomicUsize,
    held_at_once: AtomicUsize,
}

impl Flood {
    fn start(address: SocketAddr) -> Self {
        let end = Instant::now() + FLOOD;
        let counts = Arc::new(Counts::default());
        let kinds = (0..HELD)
            .map(|_| Kind::Held)
            .chain((0..UNUSED).map(Kind::unused));
        let tasks = kinds
            .map(|kind| tokio::spawn(flood(address, kind, end, counts.clone())))
            .collect();
        Self { end, tasks, counts }
    }

    async fn finish(self) -> Opened {
        for task in self.tasks {
            task.await.unwrap();
        }
        Opened {
            total: self.counts.total.load(Ordering::Relaxed),
            held_at_once: self.counts.held_at_once.load(Ordering::Relaxed),
        }
    }
}

/// How a flood connection holds its slot.
#[derive(Clone, Copy)]
enum Kind {
    /// One request answered, then half of the next head: a connection busy with a request.
    Held,
    /// Nothing sent, or half a first head.
    Unused { partial: bool },
}

impl Kind {
    fn unused(n: usize) -> Self {
        Self::Unused {
            partial: n.is_multiple_of(2),
        }
    }
}

/// Opens `kind` connections to `address` one after the other until `end`, each held until
/// hookd closes it (or `end`).
async fn flood(address: SocketAddr, kind: Kind, end: Instant, counts: Arc<Counts>) {
    while Instant::now() < end {
        if let Ok(Ok(mut stream)) = tokio::time::timeout_at(end, connect(address)).await {
            counts.total.fetch_add(1, Ordering::Relaxed);
            if occupy(&mut stream, kind).await.is_ok() {
                let served = matches!(kind, Kind::Held);
                if served {
                    let now = counts.held_now.fetch_add(1, Ordering::Relaxed) + 1;
                    counts.held_at_once.fetch_max(now, Ordering::Relaxed);
                }
                let _ = tokio::time::timeout_at(end, stream.read(&mut [0u8; 64])).await;
                if served {
                    counts.held_now.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}

async fn connect(address: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((FLOODER, 0)))?;
    socket.connect(address).await
}

/// Puts `stream` in the state `kind` holds it in; an error if hookd closed it first.
async fn occupy(stream: &mut TcpStream, kind: Kind) -> std::io::Result<()> {
    let half = &HEALTH[..HEALTH.len() / 2];
    match kind {
        Kind::Held => {
            stream.write_all(HEALTH).await?;
            read_head(stream).await?;
            stream.write_all(half).await
        }
        Kind::Unused { partial: true } => stream.write_all(half).await,
        Kind::Unused { partial: false } => Ok(()),
    }
}

/// Reads an answer's head (`/health` answers with no body); an error if the connection closed
/// first.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        if stream.read(&mut byte).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
    }
    Ok(())
}
