//! `--otlp-endpoint`: hookd's spans exported as OpenTelemetry traces over OTLP/HTTP
//! (protobuf), for an operator to follow one event from its publish to each attempt.
//!
//! The spans: `request` (every API call: method, route template, request id), `publish`
//! inside it (the message's id, application and event type), `claim` (one claim batch: asked
//! and claimed) and `attempt` (message, endpoint, application, attempt id, outcome and HTTP
//! status). A publish and the attempts of its message share `hookd.message_id`. Never a
//! payload, a URL, a header or a secret. Spans are batched on a thread of their own and sent
//! every few seconds; a collector that is down loses spans, never slows hookd.

use std::sync::Arc;

use hookd_engine::telemetry::Traceparent;
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::registry::LookupSpan;

#[derive(Debug, clap::Args)]
pub struct TraceOptions {
    /// Export traces over OTLP/HTTP to this collector (`http://collector:4318`; spans go to
    /// `/v1/traces` under it). Off by default.
    #[arg(long, env = "HOOKD_OTLP_ENDPOINT", hide_env_values = true, value_hint = clap::ValueHint::Url)]
    pub otlp_endpoint: Option<String>,
    /// Add a W3C `traceparent` header (the attempt's span) to every delivery, so receivers
    /// that trace can join hookd's trace. Needs --otlp-endpoint.
    #[arg(long, env = "HOOKD_OTLP_TRACEPARENT")]
    pub otlp_traceparent: bool,
}

/// The exporter, flushed and stopped when dropped (at the end of `serve`).
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Drop for Traces {
    fn drop(&mut self) {
        if let Err(error) = self.provider.shutdown() {
            let error = super::error_text(error);
            eprintln!("hookd: the last traces were not exported: {error}");
        }
    }
}

impl TraceOptions {
    /// The `traceparent` of each attempt, when asked for.
    pub fn traceparent(&self) -> anyhow::Result<Option<Traceparent>> {
        anyhow::ensure!(
            !self.otlp_traceparent || self.otlp_endpoint.is_some(),
            "--otlp-traceparent needs --otlp-endpoint"
        );
        Ok(self
            .otlp_traceparent
            .then(|| Traceparent(Arc::new(current_traceparent))))
    }

    /// The layer that exports hookd's spans, and its exporter; `None` without an endpoint.
    pub fn layer<S>(&self) -> anyhow::Result<Option<(impl Layer<S> + use<S>, Traces)>>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        let Some(endpoint) = &self.otlp_endpoint else {
            return Ok(None);
        };
        let exporter = SpanExporter::builder()
            .with_http()
            .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
            .build()
            .map_err(|e| anyhow::anyhow!("--otlp-endpoint: {e}"))?;
        let provider = SdkTracerProvider::builder()
            .with_resource(Resource::builder().with_service_name("hookd").build())
            .with_batch_exporter(exporter)
            .build();
        let tracer = provider.tracer("hookd");
        // hookd's own spans (the request, publish, claim and attempt ones), not its
        // dependencies'.
        let spans = Targets::new()
            .with_target("hookd", LevelFilter::DEBUG)
            .with_target("hookd_api", LevelFilter::DEBUG)
            .with_target("hookd_engine", LevelFilter::DEBUG);
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(spans);
        Ok(Some((layer, Traces { provider })))
    }
}

/// `00-{trace id}-{span id}-{flags}` of the current span, if it is being traced.
fn current_traceparent() -> Option<String> {
    let context = tracing::Span::current().context();
    let span = context.span();
    let ids = span.span_context();
    ids.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            ids.trace_id(),
            ids.span_id(),
            ids.trace_flags().to_u8()
        )
    })
}
