//! The load generator: a closed loop keeping exactly N requests in flight ([`run`]), or an
//! open loop sending at a fixed rate whatever the answers do ([`run_paced`], or
//! [`run_paced_while`] for as long as something else lasts), timing each request.
//!
//! In the closed loop N tokio tasks share one counter of requests still to send; each takes
//! the next number, sends, waits for the answer, records its latency in its own HDR
//! histogram, and goes again. The histograms are merged at the end. In the open loop request
//! `k` is due `k / rate` seconds after the first, each in a task of its own, so a slow answer
//! never delays the next send; at most a fixed number are in flight, as an application's
//! connection pool would allow, and a request that waits for its turn counts that wait in
//! its latency (it was due, so a user waited). What one "request" is (a publish, a signed POST to a
//! receiver, …) is the caller's closure, so every benchmark shares these loops.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::sync::Semaphore;

/// A request's failure to get an answer, as a reason for [`Outcome::errors`], with the causes
/// under it (reqwest's own message only says which request failed).
pub fn transport_error(error: &reqwest::Error) -> String {
    let mut reason = format!("transport: {error}");
    let mut cause = std::error::Error::source(error);
    while let Some(error) = cause {
        reason.push_str(&format!(": {error}"));
        cause = error.source();
    }
    reason
}

/// What a measured phase produced.
pub struct Outcome {
    /// Latency of each request, in microseconds (failed ones included).
    pub latency_us: Histogram<u64>,
    /// Requests that failed, by reason (e.g. `HTTP 500`, `transport: …`).
    pub errors: BTreeMap<String, u64>,
    /// Wall time from the first request sent to the last answer received.
    pub elapsed: Duration,
    /// Requests completed (succeeded or failed).
    pub completed: u64,
}

impl Outcome {
    pub fn new() -> Self {
        Self {
            latency_us: new_histogram(),
            errors: BTreeMap::new(),
            elapsed: Duration::ZERO,
            completed: 0,
        }
    }

    /// Adds one request's latency and result.
    fn record(&mut self, latency: Duration, result: Result<(), String>) {
        self.latency_us
            .saturating_record(latency.as_micros() as u64);
        if let Err(reason) = result {
            *self.errors.entry(reason).or_default() += 1;
        }
    }

    /// Adds another worker's (or phase's) histogram and errors to this one.
    pub fn merge(&mut self, other: Outcome) {
        self.latency_us
            .add(other.latency_us)
            .expect("histograms of equal bounds add");
        for (reason, n) in other.errors {
            *self.errors.entry(reason).or_default() += n;
        }
    }

    /// Requests per second over the measured phase.
    pub fn throughput(&self) -> f64 {
        self.completed as f64 / self.elapsed.as_secs_f64()
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// The latency at `quantile` (0..=1), as a duration.
    pub fn latency(&self, quantile: f64) -> Duration {
        Duration::from_micros(self.latency_us.value_at_quantile(quantile))
    }

    pub fn max_latency(&self) -> Duration {
        Duration::from_micros(self.latency_us.max())
    }
}

/// A request maker as a trait object, for callers that build it in one place and hand it on.
pub type Requests =
    Arc<dyn Fn(u64) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// Sends requests number `numbers.start` to `numbers.end - 1`, `concurrency` at a time,
/// calling `request(i)` for each; a request's `Err` is its failure reason. A warm-up is a
/// call whose outcome is thrown away.
pub async fn run<F, Fut>(concurrency: usize, numbers: Range<u64>, request: Arc<F>) -> Outcome
where
    F: Fn(u64) -> Fut + Send + Sync + ?Sized + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let next = Arc::new(AtomicU64::new(numbers.start));
    let end = numbers.end;
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (next, request) = (next.clone(), request.clone());
            tokio::spawn(async move {
                let mut outcome = Outcome::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        break;
                    }
                    let sent = Instant::now();
                    let result = request(i).await;
                    outcome.record(sent.elapsed(), result);
                }
                outcome
            })
        })
        .collect();
    let mut outcome = Outcome::new();
    for worker in workers {
        outcome.merge(worker.await.expect("a load worker panicked"));
    }
    outcome.elapsed = started.elapsed();
    outcome.completed = outcome.latency_us.len();
    outcome
}

/// Sends requests number `numbers.start` to `numbers.end - 1` at `per_second`, open loop:
/// each is due on schedule however many are still unanswered, and its latency counts from
/// then. At most `connections` are in flight at once; the rest wait for a turn. (Unbounded, a
/// client that falls behind opens a connection per request and spends itself on connecting
/// and closing them: thousands in TIME_WAIT, the rate lost, and the server idle.)
pub async fn run_paced<F, Fut>(
    per_second: f64,
    connections: usize,
    numbers: Range<u64>,
    request: Arc<F>,
) -> Outcome
where
    F: Fn(u64) -> Fut + Send + Sync + ?Sized + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    run_paced_while(per_second, connections, numbers, request, || true).await
}

/// [`run_paced`] for as long as `go_on()` holds: once it answers `false` when a request is
/// due, no more are sent, and those already sent are waited for. For a load that lasts as
/// long as something else does (pass a range too long to run out).
pub async fn run_paced_while<F, Fut>(
    per_second: f64,
    connections: usize,
    numbers: Range<u64>,
    request: Arc<F>,
    go_on: impl Fn() -> bool,
) -> Outcome
where
    F: Fn(u64) -> Fut + Send + Sync + ?Sized + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    // On tokio's clock: the same as the system's, and a paused test clock can check the pacing.
    let started = tokio::time::Instant::now();
    let turns = Arc::new(Semaphore::new(connections.max(1)));
    let mut requests = Vec::new();
    for (k, i) in numbers.enumerate() {
        tokio::time::sleep_until(started + Duration::from_secs_f64(k as f64 / per_second)).await;
        if !go_on() {
            break;
        }
        let due = Instant::now();
        // Made when due: a request that notes its send time notes this one.
        let request = request(i);
        let turns = turns.clone();
        requests.push(tokio::spawn(async move {
            let _turn = turns
                .acquire_owned()
                .await
                .expect("the turns are never closed");
            let result = request.await;
            (due.elapsed(), result)
        }));
    }
    let mut outcome = Outcome::new();
    for request in requests {
        let (latency, result) = request.await.expect("a paced request panicked");
        outcome.record(latency, result);
    }
    outcome.elapsed = started.elapsed();
    outcome.completed = outcome.latency_us.len();
    outcome
}

/// 1 µs to 10 min, 3 significant digits.
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a paused clock, which moves only to the next timer: the pacing alone decides.
    #[tokio::test(start_paused = true)]
    async fn paced_requests_keep_the_rate() {
        let outcome = run_paced(1_000.0, 4, 0..200, Arc::new(|_| async { Ok(()) })).await;
        assert_eq!(outcome.completed, 200);
        // 200 requests at 1,000/s: the last starts 199 ms after the first, and no later.
        assert!(
            (Duration::from_millis(199)..Duration::from_millis(200)).contains(&outcome.elapsed),
            "{:?}",
            outcome.elapsed
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_load_stops_when_told() {
        let sent = Arc::new(AtomicU64::new(0));
        let counter = sent.clone();
        let request = Arc::new(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
            async { Ok(()) }
        });
        let outcome = run_paced_while(1_000.0, 4, 0..u64::MAX, request, || {
            sent.load(Ordering::Relaxed) < 50
        })
        .await;
        assert_eq!(outcome.completed, 50);
    }

    #[tokio::test]
    async fn every_number_is_sent_once_and_failures_are_counted() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let outcome = run(
            4,
            10..30,
            Arc::new(move |i: u64| {
                log.lock().unwrap().push(i);
                async move {
                    if i.is_multiple_of(5) {
                        Err("HTTP 500".to_owned())
                    } else {
                        Ok(())
                    }
                }
            }),
        )
        .await;
        let mut seen = seen.lock().unwrap().clone();
        seen.sort_unstable();
        assert_eq!(seen, (10..30).collect::<Vec<_>>());
        assert_eq!(outcome.completed, 20);
        assert_eq!(outcome.errors.get("HTTP 500"), Some(&4));
        assert_eq!(outcome.error_count(), 4);
    }
}
