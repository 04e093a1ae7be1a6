//! What every API request leaves for operators: an `x-request-id` on its response (the
//! caller's own when it is well-formed, a new one otherwise), a tracing span carrying it so
//! every log line of the request names it, and its count and latency for `/metrics`, by route
//! template (never the path itself: ids would make the series unbounded), method and status
//! class.
//!
//! [`Front`] is the one layer every request passes first: besides the above, it holds the
//! bound on requests in progress ([`InFlight`]) and answers a panicking handler with a 500.
//! One hand-written layer rather than a middleware function each: every layer of axum's costs
//! boxed services cloned and a boxed future per request.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use metrics::{Counter, Histogram};
use tower::Service;
use tracing::Instrument;

use crate::ApiError;
use crate::overload::InFlight;

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

/// The route label of a request no route matched.
const UNMATCHED: &str = "unmatched";

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

/// The layer in front of every request: its id, span and metrics, the bound on requests in
/// progress, and a panic answered as a 500.
#[derive(Clone)]
pub(crate) struct Front {
    in_flight: InFlight,
    metrics: Arc<RequestMetrics>,
}

impl Front {
    pub(crate) fn new(in_flight: InFlight) -> Self {
        Self {
            in_flight,
            metrics: Arc::default(),
        }
    }
}

impl<S> tower::Layer<S> for Front {
    type Service = FrontService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FrontService {
            inner,
            front: self.clone(),
        }
    }
}

/// [`Front`] around a route.
#[derive(Clone)]
pub(crate) struct FrontService<S> {
    inner: S,
    front: Front,
}

/// A response on its way, as the [`FrontService`] answers it.
type Answer = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl<S> Service<Request> for FrontService<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Answer {
        let id = request
            .headers()
            .get(&REQUEST_ID)
            .and_then(|value| value.to_str().ok())
            .filter(|id| well_formed(id))
            .map_or_else(new_id, str::to_owned);
        let route = request.extensions().get::<MatchedPath>().cloned();
        let route_label = route.as_ref().map_or(UNMATCHED, MatchedPath::as_str);
        let method = method_label(request.method());
        let span = tracing::info_span!("request", request_id = %id, method, route = route_label);
        let started = Instant::now();
        // Past the bound nothing is started; the permit is held until the answer is made.
        let running = self.front.in_flight.enter().map(|permit| {
            let future = std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(request)));
            (permit, future)
        });
        let metrics = self.front.metrics.clone();
        Box::pin(async move {
            let answer = async move {
                let Some((_permit, future)) = running else {
                    return ApiError::Overloaded.into_response();
                };
                match future {
                    Ok(future) => unwinding(future).await,
                    Err(_) => panicked(),
                }
            };
            let mut response = answer.instrument(span).await;
            let route_label = route.as_ref().map_or(UNMATCHED, MatchedPath::as_str);
            let status = status_class(response.status().as_u16());
            metrics.record(route_label, method, status, started.elapsed().as_secs_f64());
            let value = HeaderValue::from_str(&id).expect("request ids are visible ASCII");
            response.headers_mut().insert(REQUEST_ID, value);
            Ok(response)
        })
    }
}

/// `future`'s response, or a 500 if it panics.
async fn unwinding<F>(future: F) -> Response
where
    F: Future<Output = Result<Response, Infallible>>,
{
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(Ok(response))) => Poll::Ready(response),
            Ok(Poll::Ready(Err(never))) => match never {},
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(panicked()),
        }
    })
    .await
}

/// The answer to a request whose handler panicked.
fn panicked() -> Response {
    ApiError::Internal("a handler panicked".into()).into_response()
}

fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// The request metrics' handles, by route template, method and status class: registering a
/// labelled metric looks its key up in the recorder's registry, so each is registered once.
/// The handles stay valid because the exporter never drops idle metrics.
#[derive(Default)]
struct RequestMetrics {
    by_route: Mutex<HashMap<String, Vec<Handles>>>,
}

/// One route's handles for one method and status class.
struct Handles {
    method: &'static str,
    status: &'static str,
    requests: Counter,
    duration: Histogram,
}

impl RequestMetrics {
    /// Counts a request of `route` and `method` answered with `status` after `seconds`.
    fn record(&self, route: &str, method: &'static str, status: &'static str, seconds: f64) {
        let mut by_route = self.by_route.lock().unwrap_or_else(PoisonError::into_inner);
        let handles = match by_route.get_mut(route) {
            Some(handles) => handles,
            None => by_route.entry(route.to_owned()).or_default(),
        };
        let position = handles
            .iter()
            .position(|h| h.method == method && h.status == status);
        let found = match position {
            Some(at) => &handles[at],
            None => {
                handles.push(Handles::register(route, method, status));
                handles.last().expect("just pushed")
            }
        };
        found.requests.increment(1);
        found.duration.record(seconds);
    }
}

impl Handles {
    fn register(route: &str, method: &'static str, status: &'static str) -> Self {
        let route = route.to_owned();
        Self {
            method,
            status,
            requests: metrics::counter!(
                REQUESTS, "route" => route.clone(), "method" => method, "status" => status
            ),
            duration: metrics::histogram!(REQUEST_DURATION, "route" => route, "method" => method),
        }
    }
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
    crate::auth::hex(&bytes)
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
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_is_answered_500_with_its_request_id() {
        async fn panics() -> &'static str {
            panic!("a handler bug")
        }
        let app = Router::new()
            .route("/panics", get(panics))
            .layer(Front::new(InFlight::new(8)));
        let request = Request::builder()
            .uri("/panics")
            .header(REQUEST_ID, "req-1")
            .body(Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 500);
        assert_eq!(response.headers()[REQUEST_ID], "req-1");
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["code"], "internal");
    }

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
