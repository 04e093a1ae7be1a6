//! Test support for hookd's own tests (cargo feature `testing`): a real HTTP receiver on
//! loopback that records what it gets and answers as the test decides, a request reader for
//! receivers a test writes by hand (raw TCP, TLS), and the Python interpreter that runs the
//! reference libraries (code we did not write) against hookd.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;

/// One request a receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    /// When it arrived: tests of pauses and schedules compare these.
    pub at: tokio::time::Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
}

/// A loopback HTTP receiver whose answer to the n-th request (from 0) `respond` decides.
pub struct Receiver {
    pub url: String,
    pub received: Arc<Mutex<Vec<Received>>>,
    pub arrived: Arc<Notify>,
}

impl Receiver {
    /// Starts a receiver at `http://127.0.0.1:<port>/hook` on a free port.
    pub async fn start<F, Fut>(respond: F) -> Self
    where
        F: Fn(usize) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = StatusCode> + Send,
    {
        Self::start_at("127.0.0.1:0".parse().unwrap(), respond).await
    }

    /// Starts a receiver at `http://<address>/hook`: a receiver coming back on the address an
    /// endpoint already points at.
    pub async fn start_at<F, Fut>(address: std::net::SocketAddr, respond: F) -> Self
    where
        F: Fn(usize) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = StatusCode> + Send,
    {
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let arrived = Arc::new(Notify::new());
        let (log, bell) = (received.clone(), arrived.clone());
        let handler = move |headers: HeaderMap, body: Bytes| {
            let (log, bell, respond) = (log.clone(), bell.clone(), respond.clone());
            async move {
                let n = {
                    let mut log = log.lock().unwrap();
                    log.push(Received {
                        headers,
                        body,
                        at: tokio::time::Instant::now(),
                    });
                    log.len() - 1
                };
                bell.notify_waiters();
                respond(n).await.into_response()
            }
        };
        let app = axum::Router::new().route("/hook", axum::routing::post(handler));
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url,
            received,
            arrived,
        }
    }

    /// A receiver that always answers `status`.
    pub async fn always(status: StatusCode) -> Self {
        Self::start(move |_| async move { status }).await
    }

    /// A receiver that answers `status` to its first `failures` requests, then 204.
    pub async fn failing_first(failures: usize, status: StatusCode) -> Self {
        Self::start(move |n| async move {
            if n < failures {
                status
            } else {
                StatusCode::NO_CONTENT
            }
        })
        .await
    }

    pub fn count(&self) -> usize {
        self.received.lock().unwrap().len()
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Waits (bounded, so a broken engine fails instead of hanging) for `n` requests.
    pub async fn wait_for(&self, n: usize) {
        tokio::time::timeout(Duration::from_secs(20), async {
            while self.count() < n {
                let bell = self.arrived.notified();
                if self.count() >= n {
                    break;
                }
                let _ = tokio::time::timeout(Duration::from_millis(50), bell).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("expected {n} requests, got {}", self.count()));
    }
}

/// Reads one HTTP/1.1 request (head and `content-length` body); `None` if the peer left.
pub async fn read_request(stream: &mut (impl AsyncRead + Unpin)) -> Option<()> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    Some(())
}

/// The interpreter with the reference libraries (`HOOKD_TEST_PYTHON`), or `None` (after saying
/// so) when the test is to be skipped; `HOOKD_TEST_REQUIRE_PYTHON=1` (CI) turns a missing one
/// into a failure.
pub fn python() -> Option<String> {
    match std::env::var("HOOKD_TEST_PYTHON") {
        Ok(python) if !python.is_empty() => Some(python),
        _ if std::env::var("HOOKD_TEST_REQUIRE_PYTHON").as_deref() == Ok("1") => {
            panic!("HOOKD_TEST_PYTHON not set, and HOOKD_TEST_REQUIRE_PYTHON=1 requires it")
        }
        _ => {
            // Written to the real stderr, past the test harness's capture, so it is seen.
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "SKIPPED: HOOKD_TEST_PYTHON not set");
            None
        }
    }
}
