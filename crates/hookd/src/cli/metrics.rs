//! `/metrics` for `hookd serve`: installs the Prometheus exporter (histograms with explicit
//! buckets, never summaries, so they add up across processes), samples the database-wide
//! gauges on a timer, and serves the text format on the API listener (and, for a process
//! without one, on `--metrics-listen`), behind a bearer token when one is configured.
//!
//! The gauges come from the database, so a task samples them every few seconds instead of
//! every scrape: however often Prometheus (or anyone) scrapes, the database sees one cheap
//! read per period.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use hookd_api::ApiError;
use hookd_core::Clock;
use hookd_store::{Gauges, Store};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Upper bounds (seconds) of every latency histogram's buckets: from a receiver on the same
/// network to the longest attempt timeout (30 s).
const LATENCY_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0,
];
/// Buckets for the engine's store writes, which take milliseconds when all is well.
const STORE_WRITE_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];
/// How often the database-wide gauges are sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// Connections the metrics listener holds at once: scrapers are few, and a flood of
/// connections there must not take the file descriptors the API needs.
const SCRAPERS: usize = 16;

const QUEUE_DEPTH: &str = "hookd_queue_depth";
const IN_FLIGHT: &str = "hookd_deliveries_in_flight";
const OLDEST_DUE: &str = "hookd_queue_oldest_due_age_seconds";
const ENDPOINTS_DISABLED: &str = "hookd_endpoints_disabled";
const OUTBOX_LAG: &str = "hookd_outbox_lag_seconds";
const DATABASE_BYTES: &str = "hookd_database_size_bytes";

#[derive(Debug, clap::Args)]
pub struct MetricsOptions {
    /// Bearer token that `GET /metrics` requires. Without one, `/metrics` is open to anyone
    /// who can reach the API listener.
    #[arg(long, env = "HOOKD_METRICS_TOKEN", hide_env_values = true)]
    metrics_token: Option<String>,
    /// Also serve `/metrics` (alone) on this address: for `--role engine`, which has no API
    /// listener.
    #[arg(long, env = "HOOKD_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
}

/// The installed exporter, ready to serve and sample.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
    /// The configured token's digest (compared digest to digest, as API tokens are).
    token_hash: Option<String>,
}

impl MetricsOptions {
    /// Installs the process-wide Prometheus recorder (once per process).
    pub fn install(&self) -> anyhow::Result<Metrics> {
        let handle = PrometheusBuilder::new()
            .set_buckets(LATENCY_BUCKETS)?
            .set_buckets_for_metric(
                Matcher::Full(hookd_engine::telemetry::STORE_WRITE_DURATION.to_owned()),
                STORE_WRITE_BUCKETS,
            )?
            .install_recorder()?;
        hookd_engine::telemetry::describe();
        hookd_api::observe::describe();
        hookd_api::routes::ingest::describe();
        describe_gauges();
        Ok(Metrics {
            handle,
            token_hash: self.metrics_token.as_deref().map(hookd_api::token_hash),
        })
    }
}

impl Metrics {
    /// `GET /metrics`.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/metrics", axum::routing::get(render))
            .with_state(self.clone())
    }

    /// Serves `/metrics` alone on `listener` until `stop` completes, as the API is served
    /// (see [`hookd_api::serve`]), holding at most [`SCRAPERS`] connections.
    pub async fn serve_alone(
        self,
        listener: tokio::net::TcpListener,
        timeouts: hookd_api::Timeouts,
        stop: impl Future<Output = ()> + Send + 'static,
    ) {
        let listener = hookd_api::ConnectionLimit::new(listener, SCRAPERS);
        hookd_api::serve(listener, self.router(), timeouts, stop).await;
    }

    /// Samples the database-wide gauges every [`SAMPLE_EVERY`], and keeps the exporter's
    /// histograms tidy; runs for the life of the process.
    pub async fn sample(self, store: Arc<dyn Store>, clock: Arc<dyn Clock>) {
        loop {
            match store.gauges(clock.now()).await {
                Ok(gauges) => set_gauges(&gauges),
                Err(error) => tracing::warn!(%error, "cannot sample the queue gauges"),
            }
            self.handle.run_upkeep();
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
    }
}

async fn render(State(metrics): State<Metrics>, headers: HeaderMap) -> Response {
    if let Some(expected) = &metrics.token_hash {
        let given = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(hookd_api::token_hash);
        if given.as_ref() != Some(expected) {
            return ApiError::Unauthorized.into_response();
        }
    }
    let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    ([(CONTENT_TYPE, content_type)], metrics.handle.render()).into_response()
}

fn describe_gauges() {
    metrics::describe_gauge!(
        QUEUE_DEPTH,
        "Deliveries of enabled endpoints waiting: state=due (due now) or scheduled (retries due later)."
    );
    metrics::describe_gauge!(
        IN_FLIGHT,
        "Deliveries claimed under a live lease, in every process."
    );
    metrics::describe_gauge!(
        OLDEST_DUE,
        metrics::Unit::Seconds,
        "How long the oldest due delivery has waited past its due time (0 when none is due)."
    );
    metrics::describe_gauge!(ENDPOINTS_DISABLED, "Endpoints disabled.");
    metrics::describe_gauge!(
        OUTBOX_LAG,
        metrics::Unit::Seconds,
        "How long the oldest outbox row waiting to be relayed has waited (0 when none waits)."
    );
    metrics::describe_gauge!(
        DATABASE_BYTES,
        metrics::Unit::Bytes,
        "Bytes hookd's data takes: the SQLite file, or hookd's PostgreSQL tables with their indexes."
    );
}

fn set_gauges(gauges: &Gauges) {
    metrics::gauge!(QUEUE_DEPTH, "state" => "due").set(gauges.due as f64);
    metrics::gauge!(QUEUE_DEPTH, "state" => "scheduled").set(gauges.scheduled as f64);
    metrics::gauge!(IN_FLIGHT).set(gauges.in_flight as f64);
    metrics::gauge!(OLDEST_DUE).set(gauges.oldest_due_age.as_secs_f64());
    metrics::gauge!(ENDPOINTS_DISABLED).set(gauges.endpoints_disabled as f64);
    metrics::gauge!(OUTBOX_LAG).set(gauges.outbox_lag.as_secs_f64());
    metrics::gauge!(DATABASE_BYTES).set(gauges.database_bytes as f64);
}
