//! What every API request leaves for operators: an `x-request-id` on its response (the
//! caller's own when it is well-formed, a new one otherwise), a tracing span carrying it so
//! every log line of the request names it, and its count and latency for `/metrics`, by route
//! template (never the path itself: ids would make the series unbounded), method and status
//! class.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// The header that carries a request's id, both ways.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// Counter: API requests answered, by `route`, `method` and `status` class.
pub const REQUESTS: &str = "hookd_api_requests_total";
/// Histogram (seconds): how long API requests took, by `route` and `method`.
pub const REQUEST_DURATION: &str = "hookd_api_request_duration_seconds";
/// Counter: messages published through the API whose payload is over `--large-payload-bytes`.
pub const LARGE_PAYLOADS: &str = "hookd_large_payloads_total";

/// Longest request id taken from a caller.
const MAX_ID_LEN: usize = 128;

/// Gives the metrics their help texts (once, after the recorder is installed).
pub fn describe() {
    metrics::describe_counter!(
        REQUESTS,
        "API requests answered, by route template, method and status class."
    );
    metrics::describe_histogram!(
        REQUEST_DURATION,
        metrics::Unit::Seconds,
        "How long API requests took, by route template and method."
    );
    metrics::describe_counter!(
        LARGE_PAYLOADS,
        "Messages published through the API whose payload is over --large-payload-bytes."
    );
}

/// Middleware: the request id, the request's span, its metrics.
pub async fn observe(request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(&REQUEST_ID)
        .and_then(|value| value.to_str().ok())
        .filter(|id| well_formed(id))
        .map_or_else(new_id, str::to_owned);
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let method = method_label(request.method());
    let span = tracing::info_span!("request", request_id = %id, method, route);
    let started = Instant::now();
    let mut response = next.run(request).instrument(span).await;
    let status = match response.status().as_u16() {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    };
    metrics::counter!(REQUESTS, "route" => route.clone(), "method" => method, "status" => status)
        .increment(1);
    metrics::histogram!(REQUEST_DURATION, "route" => route, "method" => method)
        .record(started.elapsed().as_secs_f64());
    let value = HeaderValue::from_str(&id).expect("request ids are visible ASCII");
    response.headers_mut().insert(REQUEST_ID, value);
    response
}

/// A caller's id is echoed only if it is short, visible ASCII from a small set: it goes into
/// log lines and a response header as it is.
fn well_formed(id: &str) -> bool {
    (1..=MAX_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// 16 random bytes in hex.
fn new_id() -> String {
    let mut bytes = [0u8; 16];
    rand::Rng::fill_bytes(&mut rand::rng(), &mut bytes);
    hex::encode(bytes)
}

/// The method as a label: the standard ones by name, anything else as `other` (a client can
/// send any token as a method, and labels must stay a small set).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_plain_ids_are_echoed() {
        assert!(well_formed("req-42_a.b:c"));
        assert!(well_formed(&"a".repeat(MAX_ID_LEN)));
        assert!(!well_formed(""));
        assert!(!well_formed(&"a".repeat(MAX_ID_LEN + 1)));
        assert!(!well_formed("has space"));
        assert!(!well_formed("quote\"d"));
        assert!(well_formed(&new_id()));
        assert_ne!(new_id(), new_id());
    }
}
