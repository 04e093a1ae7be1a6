//! `GET /api/v1/app/{app}/endpoint/{ep}/stats`: how an endpoint is doing over a period (the
//! last day unless `since`/`until` say otherwise), in Svix's `EndpointStats` shape with hookd's
//! additions: the period itself, the share of its attempts that succeeded, and the adaptive
//! concurrency this process's engine has for it now.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Extension, Json, Router};
use hookd_store::EndpointStats;
use serde::Serialize;

use crate::extract::QueryParams;
use crate::routes::endpoint;
use crate::{ApiError, ApiState, Principal};

/// The period when the caller names no `since`.
const DEFAULT_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);

pub fn routes() -> Router<ApiState> {
    Router::new().route(
        v1!("/app/{app_id}/endpoint/{endpoint_id}/stats"),
        get(stats),
    )
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EndpointStatsOut {
    /// Deliveries of the messages created in the period, by where they stand.
    success: u64,
    pending: u64,
    sending: u64,
    fail: u64,
    /// Svix counts canceled deliveries; hookd never cancels one.
    canceled: u64,
    /// hookd additions: the period counted (RFC 3339), …
    since: String,
    until: String,
    /// … the attempts made in it, how many succeeded, and that share (null without attempts).
    attempts: u64,
    successful_attempts: u64,
    success_rate: Option<f64>,
    /// … and now, in this process's engine: the attempts the endpoint may have in flight and
    /// those in flight (null when the engine has no work for it, or the process runs none).
    concurrency_limit: Option<usize>,
    in_flight: Option<usize>,
}

async fn stats(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    query: QueryParams,
) -> Result<Json<EndpointStatsOut>, ApiError> {
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    let until = query
        .timestamp("until")?
        .unwrap_or_else(|| state.clock().now());
    let since = query
        .timestamp("since")?
        .unwrap_or_else(|| until.minus(DEFAULT_PERIOD));
    if since >= until {
        return Err(ApiError::query_param("since", "must be before until"));
    }
    let counts: EndpointStats = state.store().endpoint_stats(&ep, since, until).await?;
    let now = state.endpoint_concurrency(&ep.id);
    Ok(Json(EndpointStatsOut {
        success: counts.success,
        pending: counts.pending,
        sending: counts.sending,
        fail: counts.fail,
        canceled: 0,
        since: since.to_rfc3339(),
        until: until.to_rfc3339(),
        attempts: counts.attempts,
        successful_attempts: counts.successful_attempts,
        success_rate: (counts.attempts > 0)
            .then(|| counts.successful_attempts as f64 / counts.attempts as f64),
        concurrency_limit: now.map(|c| c.limit),
        in_flight: now.map(|c| c.in_flight),
    }))
}
