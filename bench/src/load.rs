//! The load generator: a closed loop keeping exactly N requests in flight, timing each one.
//!
//! N tokio tasks share one counter of requests still to send; each takes the next number,
//! sends, waits for the answer, records its latency in its own HDR histogram, and goes
//! again. The histograms are merged at the end. What one "request" is (a publish, a signed
//! POST to a receiver, …) is the caller's closure, so every benchmark shares this loop.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

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
                let mut latency = new_histogram();
                let mut errors = BTreeMap::<String, u64>::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        break;
                    }
                    let sent = Instant::now();
                    let result = request(i).await;
                    latency.saturating_record(sent.elapsed().as_micros() as u64);
                    if let Err(reason) = result {
                        *errors.entry(reason).or_default() += 1;
                    }
                }
                (latency, errors)
            })
        })
        .collect();
    let mut outcome = Outcome {
        latency_us: new_histogram(),
        errors: BTreeMap::new(),
        elapsed: Duration::ZERO,
        completed: 0,
    };
    for worker in workers {
        let (latency, errors) = worker.await.expect("a load worker panicked");
        outcome
            .latency_us
            .add(latency)
            .expect("histograms of equal bounds add");
        for (reason, n) in errors {
            *outcome.errors.entry(reason).or_default() += n;
        }
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
