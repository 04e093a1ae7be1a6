//! The engine's metrics, through the `metrics` facade (`hookd serve` installs the Prometheus
//! exporter; without a recorder they cost next to nothing): every attempt counted by the class
//! of its outcome with its latency, every delivery that settles, and the retention purge's
//! progress; and [`Traceparent`], how a delivery names its trace when traces are exported.
//!
//! Labels come from small fixed sets, never from a URL, an id or a response: Prometheus keeps
//! one series per label value, so anything unbounded there would grow without end.

use std::sync::OnceLock;
use std::time::Duration;

use hookd_core::model::DeliveryStatus;
use metrics::{Counter, Histogram};

use crate::http::{SendError, SendOutcome};

/// Counter: attempts made, by `outcome`.
pub const ATTEMPTS: &str = "hookd_delivery_attempts_total";
/// Histogram (seconds): how long attempts took, by `outcome`.
pub const ATTEMPT_DURATION: &str = "hookd_delivery_attempt_duration_seconds";
/// Counter: deliveries settled, by `result` (`succeeded`, or `failed` for good).
pub const SETTLED: &str = "hookd_deliveries_settled_total";

/// The `outcome` of an attempt that was never sent (the endpoint's keys could not be opened,
/// or the payload was expunged).
pub const NOT_SENT: &str = "not_sent";

/// How long the engine's writes to the store took: claims and batches of recorded attempts.
pub const STORE_WRITE_DURATION: &str = "hookd_store_write_duration_seconds";
/// The rows those writes moved (deliveries claimed, attempts recorded): over the duration's
/// count, the mean batch.
pub const STORE_WRITE_ROWS: &str = "hookd_store_write_rows_total";

/// Histogram: the concurrency limit each attempt's endpoint had when its answer came (see
/// `pipeline::adaptive`); no endpoint label, so the series stay few.
pub const ENDPOINT_LIMIT: &str = "hookd_endpoint_concurrency_limit";
/// Gauges, sampled each poll interval: the highest limit and the most attempts in flight of
/// any one endpoint, and how many endpoints have attempts in flight.
pub const ENDPOINT_LIMIT_MAX: &str = "hookd_endpoint_concurrency_limit_max";
pub const ENDPOINT_IN_FLIGHT_MAX: &str = "hookd_endpoint_in_flight_max";
pub const ENDPOINTS_SENDING: &str = "hookd_endpoints_sending";
/// Gauges, sampled each poll interval: attempts in flight in this process, deliveries it
/// holds with their messages (claimed ahead, being written by a publish, or in flight), and
/// attempts it sent that are not yet recorded.
pub const ATTEMPTS_IN_FLIGHT: &str = "hookd_engine_attempts_in_flight";
pub const DELIVERIES_HELD: &str = "hookd_engine_deliveries_held";
pub const ATTEMPTS_UNRECORDED: &str = "hookd_engine_attempts_unrecorded";

/// Counter: rows the purger deleted, by `table` (`attempts`, `deliveries`, `messages`,
/// `spent_event_ids`).
pub const PURGE_ROWS_DELETED: &str = "hookd_retention_rows_deleted_total";
/// Counter: messages whose payload the purger dropped.
pub const PURGE_PAYLOADS: &str = "hookd_retention_payloads_purged_total";
/// Gauge: when this process's purger last finished a pass (unix seconds).
pub const PURGE_PASS_END: &str = "hookd_retention_last_pass_end_timestamp_seconds";

/// Where an attempt's W3C `traceparent` header comes from: a function of the current span (the
/// attempt's), given by whoever exports traces, so the engine needs no tracing backend.
#[derive(Clone)]
pub struct Traceparent(pub std::sync::Arc<dyn Fn() -> Option<String> + Send + Sync>);

impl std::fmt::Debug for Traceparent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Traceparent")
    }
}

/// Gives the metrics their help texts (once, after the recorder is installed).
pub fn describe() {
    metrics::describe_counter!(
        ATTEMPTS,
        "Delivery attempts made, by outcome: 2xx, 3xx, 4xx, 5xx, timeout, connect, ssrf_refused, invalid_url, request_error, not_sent."
    );
    metrics::describe_histogram!(
        ATTEMPT_DURATION,
        metrics::Unit::Seconds,
        "How long delivery attempts took, by outcome."
    );
    metrics::describe_counter!(
        PURGE_ROWS_DELETED,
        "Rows the retention purge deleted, by table: attempts, deliveries, messages, spent_event_ids."
    );
    metrics::describe_counter!(
        PURGE_PAYLOADS,
        "Messages whose payload the retention purge dropped."
    );
    metrics::describe_gauge!(
        PURGE_PASS_END,
        "When this process's retention purge last finished a pass (unix seconds)."
    );
    metrics::describe_counter!(
        SETTLED,
        "Deliveries settled: succeeded, or failed for good (schedule exhausted or 410 Gone)."
    );
    metrics::describe_histogram!(
        STORE_WRITE_DURATION,
        metrics::Unit::Seconds,
        "How long the engine's store writes took, by op: claim, record (a batch of attempts)."
    );
    metrics::describe_counter!(
        STORE_WRITE_ROWS,
        "Rows the engine's store writes moved, by op: deliveries claimed, attempts recorded."
    );
    metrics::describe_histogram!(
        ENDPOINT_LIMIT,
        "The adaptive concurrency limit of each attempt's endpoint when its answer came."
    );
    metrics::describe_gauge!(
        ENDPOINT_LIMIT_MAX,
        "The highest adaptive concurrency limit of any endpoint with work in this process."
    );
    metrics::describe_gauge!(
        ENDPOINT_IN_FLIGHT_MAX,
        "The most attempts in flight to any one endpoint from this process."
    );
    metrics::describe_gauge!(
        ENDPOINTS_SENDING,
        "Endpoints with attempts in flight from this process."
    );
    metrics::describe_gauge!(
        ATTEMPTS_IN_FLIGHT,
        "Attempts in flight from this process (at most --workers)."
    );
    metrics::describe_gauge!(
        DELIVERIES_HELD,
        "Deliveries this process holds with their messages: claimed ahead, being written by a publish, or in flight (at most twice --workers)."
    );
    metrics::describe_gauge!(
        ATTEMPTS_UNRECORDED,
        "Attempts this process sent that are not yet recorded: in flight, or answered and waiting for their record (at most twice --workers). A crash now would send them again."
    );
}

/// Notes the limit an answer's endpoint had. The histogram's handle is looked up once and
/// kept (every answer records here; the recorder is installed before the engine starts).
pub fn endpoint_limit(limit: usize) {
    static HANDLE: OnceLock<Histogram> = OnceLock::new();
    HANDLE
        .get_or_init(|| metrics::histogram!(ENDPOINT_LIMIT))
        .record(limit as f64);
}

/// Sets the engine's gauges from each endpoint's (limit, in flight) and its budgets in use.
pub fn engine_load(endpoints: &[(usize, usize)], attempts: usize, held: usize, unrecorded: usize) {
    let most = |pick: fn(&(usize, usize)) -> usize| endpoints.iter().map(pick).max();
    metrics::gauge!(ENDPOINT_LIMIT_MAX).set(most(|e| e.0).unwrap_or(0) as f64);
    metrics::gauge!(ENDPOINT_IN_FLIGHT_MAX).set(most(|e| e.1).unwrap_or(0) as f64);
    let sending = endpoints.iter().filter(|e| e.1 > 0).count();
    metrics::gauge!(ENDPOINTS_SENDING).set(sending as f64);
    metrics::gauge!(ATTEMPTS_IN_FLIGHT).set(attempts as f64);
    metrics::gauge!(DELIVERIES_HELD).set(held as f64);
    metrics::gauge!(ATTEMPTS_UNRECORDED).set(unrecorded as f64);
}

/// Times one of the engine's store writes (`op`: `claim` or `record`) and counts its rows.
pub fn store_write(op: &'static str, rows: usize, took: Duration) {
    metrics::histogram!(STORE_WRITE_DURATION, "op" => op).record(took.as_secs_f64());
    metrics::counter!(STORE_WRITE_ROWS, "op" => op).increment(rows as u64);
}

/// The class of what a sent attempt got: the status class, or why there was no response.
pub fn outcome(sent: &SendOutcome) -> &'static str {
    match (sent.status, &sent.error) {
        (Some(200..=299), _) => "2xx",
        (Some(300..=399), _) => "3xx",
        (Some(400..=499), _) => "4xx",
        (Some(500..=599), _) => "5xx",
        (Some(_), _) => "other_status",
        (None, Some(SendError::Refused(_))) => "ssrf_refused",
        (None, Some(SendError::Timeout)) => "timeout",
        (None, Some(SendError::Connect(_))) => "connect",
        (None, Some(SendError::InvalidUrl(_))) => "invalid_url",
        (None, _) => "request_error",
    }
}

/// Every `outcome` [`outcome`] gives, and [`NOT_SENT`].
const OUTCOMES: [&str; 11] = [
    "2xx",
    "3xx",
    "4xx",
    "5xx",
    "other_status",
    "ssrf_refused",
    "timeout",
    "connect",
    "invalid_url",
    "request_error",
    NOT_SENT,
];

/// The `result`s of a settled delivery.
const SETTLED_RESULTS: [&str; 2] = ["succeeded", "failed"];

/// The handles of the metrics every attempt touches, one per label value, each registered on
/// first use and then kept: `metrics::counter!` with labels builds its key and looks it up in
/// the recorder's registry on every call.
#[derive(Default)]
pub struct AttemptMetrics {
    outcomes: [OnceLock<(Counter, Histogram)>; OUTCOMES.len()],
    settled: [OnceLock<Counter>; SETTLED_RESULTS.len()],
}

impl std::fmt::Debug for AttemptMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AttemptMetrics")
    }
}

impl AttemptMetrics {
    /// Counts one attempt and its latency.
    pub fn attempt(&self, outcome: &'static str, took: Duration) {
        let register = || {
            (
                metrics::counter!(ATTEMPTS, "outcome" => outcome),
                metrics::histogram!(ATTEMPT_DURATION, "outcome" => outcome),
            )
        };
        let (count, duration) = match OUTCOMES.iter().position(|known| *known == outcome) {
            Some(index) => self.outcomes[index].get_or_init(register).clone(),
            None => register(),
        };
        count.increment(1);
        duration.record(took.as_secs_f64());
    }

    /// Counts a delivery that an attempt settled (nothing for one that will be retried).
    pub fn settled(&self, status: DeliveryStatus) {
        let index = match status {
            DeliveryStatus::Success => 0,
            DeliveryStatus::Fail => 1,
            _ => return,
        };
        let result = SETTLED_RESULTS[index];
        self.settled[index]
            .get_or_init(|| metrics::counter!(SETTLED, "result" => result))
            .increment(1);
    }
}

/// Counts what one purge batch removed.
pub fn purged(batch: &hookd_store::Purged) {
    metrics::counter!(PURGE_PAYLOADS).increment(batch.messages as u64);
    for (table, rows) in [
        ("attempts", batch.attempts),
        ("deliveries", batch.deliveries),
        ("messages", batch.records as u64),
        ("spent_event_ids", batch.event_ids),
    ] {
        metrics::counter!(PURGE_ROWS_DELETED, "table" => table).increment(rows);
    }
}

/// Notes the end of a purge pass.
pub fn purge_pass_over(now: hookd_core::Timestamp) {
    metrics::gauge!(PURGE_PASS_END).set(now.as_millis() as f64 / 1000.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(status: Option<u16>, error: Option<SendError>) -> SendOutcome {
        SendOutcome {
            status,
            duration: Duration::ZERO,
            response_head: String::new(),
            response_body: String::new(),
            retry_after: None,
            error,
        }
    }

    #[test]
    fn outcomes_are_a_small_fixed_set() {
        assert_eq!(outcome(&sent(Some(204), None)), "2xx");
        assert_eq!(outcome(&sent(Some(301), None)), "3xx");
        assert_eq!(outcome(&sent(Some(410), None)), "4xx");
        assert_eq!(outcome(&sent(Some(503), None)), "5xx");
        assert_eq!(outcome(&sent(Some(99), None)), "other_status");
        let refused = SendError::Refused("http://10.0.0.1/ is private".into());
        assert_eq!(outcome(&sent(None, Some(refused))), "ssrf_refused");
        assert_eq!(outcome(&sent(None, Some(SendError::Timeout))), "timeout");
        let connect = SendError::Connect("refused".into());
        assert_eq!(outcome(&sent(None, Some(connect))), "connect");
        let reset = SendError::Request("reset".into());
        assert_eq!(outcome(&sent(None, Some(reset))), "request_error");
    }
}
