//! Adaptive concurrency against real receivers on loopback: how many attempts an endpoint gets
//! at once follows how its receiver answers, and never passes the endpoint's ceiling, on
//! SQLite, on PostgreSQL, and with two processes sharing one PostgreSQL.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::{Harness, Receiver};
use hookd_store::{NewMessage, Store};

/// A receiver that counts its requests in progress and remembers the most at once; each
/// answer takes `latency(in progress)` and is `status(request number)`.
struct Counting {
    receiver: Receiver,
    peak: Arc<AtomicUsize>,
    /// Requests in progress as each request arrived (itself included), and when it arrived,
    /// in arrival order.
    arrivals: Arc<std::sync::Mutex<Vec<(usize, Instant)>>>,
}

impl Counting {
    async fn start(
        latency: impl Fn(usize) -> Duration + Clone + Send + Sync + 'static,
        status: impl Fn(usize) -> StatusCode + Clone + Send + Sync + 'static,
    ) -> Self {
        let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let arrivals = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (counter, most, seen) = (now.clone(), peak.clone(), arrivals.clone());
        let receiver = Receiver::start(move |n| {
            let (now, peak, seen) = (counter.clone(), most.clone(), seen.clone());
            let (latency, status) = (latency.clone(), status.clone());
            async move {
                let current = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(current, Ordering::SeqCst);
                seen.lock().unwrap().push((current, Instant::now()));
                tokio::time::sleep(latency(current)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                status(n)
            }
        })
        .await;
        Self {
            receiver,
            peak,
            arrivals,
        }
    }

    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// The number of requests in progress that nine in ten requests arrived to, at most.
    fn at_arrival_p90(&self) -> usize {
        let mut seen: Vec<usize> = self.arrivals.lock().unwrap().iter().map(|a| a.0).collect();
        seen.sort_unstable();
        seen.get((seen.len() * 9).div_ceil(10).saturating_sub(1))
            .copied()
            .unwrap_or(0)
    }

    /// Requests a second between the first arrival and the last: printed, never asserted
    /// (the machine's load moves it).
    fn rate(&self) -> f64 {
        let seen = self.arrivals.lock().unwrap();
        match (seen.first(), seen.last()) {
            (Some(first), Some(last)) if seen.len() > 1 => {
                (seen.len() - 1) as f64 / (last.1 - first.1).as_secs_f64()
            }
            _ => 0.0,
        }
    }
}

/// Publishes `n` messages at once (a backlog, not a trickle of one write at a time) to every
/// endpoint of the harness's application.
async fn publish(h: &Harness, n: usize) {
    publish_through(h, std::slice::from_ref(&h.store), n).await;
}

/// Publishes `n` messages at once, through `stores` (processes) in turn.
async fn publish_through(h: &Harness, stores: &[Arc<dyn Store>], n: usize) {
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..n {
        let (store, message) = (
            stores[i % stores.len()].clone(),
            h.message("order.shipped", "{}"),
        );
        writes.spawn(async move {
            store
                .publish(NewMessage::new(message.clone()))
                .await
                .unwrap()
        });
    }
    writes.join_all().await;
    h.wake.notify_one();
}

#[tokio::test]
async fn a_receiver_with_constant_latency_is_driven_well_past_four_in_flight() {
    // Far enough away that 64 at once is only a few hundred requests a second.
    let receiver = Counting::start(|_| Duration::from_millis(200), |_| StatusCode::OK).await;
    let h = Harness::start(Harness::config()).await;
    h.endpoint(&receiver.receiver.url).await;
    publish(&h, 400).await;
    receiver.receiver.wait_for(400).await;
    assert!(
        receiver.peak() >= 32,
        "a 200 ms receiver that never slows down got at most {} at once",
        receiver.peak()
    );
}

#[tokio::test]
async fn a_receiver_whose_latency_grows_with_its_load_is_held_low() {
    // Each request in progress adds 10 ms: a receiver working through a queue, which only
    // answers later the more it is sent, as many a second at two in progress as at ten.
    let receiver = Counting::start(
        |in_progress| Duration::from_millis(10 * in_progress as u64),
        |_| StatusCode::OK,
    )
    .await;
    let h = Harness::start(Harness::config()).await;
    let endpoint = h.endpoint(&receiver.receiver.url).await;
    publish(&h, 400).await;
    receiver.receiver.wait_for(400).await;
    // Nine in ten requests, not the peak: slow start may send a dozen at once, more on a busy
    // machine, before the first answers show that more in flight answers no faster.
    let p90 = receiver.at_arrival_p90();
    eprintln!(
        "queueing receiver: {p90} in progress for nine in ten requests (peak {}), {:.0} requests/s",
        receiver.peak(),
        receiver.rate()
    );
    assert!(
        p90 <= 6,
        "a queueing receiver was sent {p90} at once for one request in ten (ceiling 512)"
    );
    let limit = h.limit_of(&endpoint).unwrap();
    assert!(limit <= 6, "it settled at {limit}");
}

#[tokio::test]
async fn a_receiver_answering_503_is_driven_down() {
    // Healthy for 300 requests, then overloaded.
    let receiver = Counting::start(
        |_| Duration::from_millis(100),
        |n| match n {
            0..300 => StatusCode::OK,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        },
    )
    .await;
    let h = Harness::start(Harness::config()).await;
    let endpoint = h.endpoint(&receiver.receiver.url).await;
    publish(&h, 300).await;
    receiver.receiver.wait_for(300).await;
    let before = h.limit_of(&endpoint).unwrap();
    assert!(before >= 16, "grew while healthy: {before}");

    // Each 503 asks for a second's pause, and each round of them halves the limit once:
    // enough messages for four rounds (a round may also end under a lower limit, when a busy
    // machine slows the answers and the limit eases off as well).
    publish(&h, 4 * before).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while h.limit_of(&endpoint).unwrap() > before / 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the limit stayed at {} after 503s (was {before})",
            h.limit_of(&endpoint).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Publishes 300 messages through `stores` (processes) in turn and returns the most requests
/// the receiver had at once, to an endpoint whose ceiling is `ceiling`.
async fn peak_under_ceiling(h: &Harness, stores: &[Arc<dyn Store>], ceiling: u16) -> usize {
    let receiver = Counting::start(|_| Duration::from_millis(20), |_| StatusCode::OK).await;
    h.endpoint_at_most(&receiver.receiver.url, ceiling).await;
    publish_through(h, stores, 300).await;
    receiver.receiver.wait_for(300).await;
    receiver.peak()
}

#[tokio::test]
async fn an_endpoints_own_ceiling_is_never_exceeded_on_sqlite() {
    let h = Harness::start(Harness::config()).await;
    let peak = peak_under_ceiling(&h, std::slice::from_ref(&h.store), 6).await;
    assert_eq!(peak, 6, "reached, never passed");
}

#[tokio::test]
async fn an_endpoints_own_ceiling_is_never_exceeded_on_postgres() {
    let Some(h) = Harness::start_on_postgres("adaptive::ceiling", Harness::config()).await else {
        return;
    };
    let peak = peak_under_ceiling(&h, std::slice::from_ref(&h.store), 6).await;
    assert_eq!(peak, 6, "reached, never passed");
}

#[tokio::test]
async fn an_endpoints_own_ceiling_holds_across_two_processes_on_postgres() {
    let config = Harness::config();
    let Some(h) = Harness::start_on_postgres("adaptive::ceiling_two", config.clone()).await else {
        return;
    };
    let other = h.another_process(config).await;
    let peak = peak_under_ceiling(&h, &[h.store.clone(), other], 6).await;
    // A delivery counts against the ceiling until its attempt is recorded, so the receiver
    // may see a little less than the ceiling at once, never more.
    assert!((3..=6).contains(&peak), "{peak} at once, ceiling 6");
}
