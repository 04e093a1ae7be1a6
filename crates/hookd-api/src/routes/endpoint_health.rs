//! `GET /api/v1/app/{app}/endpoint/{ep}/health`, a hookd extension beside Svix's `/stats`:
//! everything the portal's health view of one endpoint draws, in one call. Its attempts and
//! waiting deliveries over the last day (hourly) and the last week (six-hourly), the success
//! rate of each, the message that has waited longest, why the endpoint is disabled when it is,
//! and the concurrency this process's engine has for it now.
//!
//! Slices are aligned to whole hours (UTC) and the last one holds now, so two calls an hour
//! apart shift the chart by exactly one slice.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Extension, Json, Router};
use hookd_core::Timestamp;
use hookd_core::model::Endpoint;
use hookd_store::{HealthBucket, HealthWindow};
use serde::Serialize;

use crate::routes::endpoint;
use crate::{ApiError, ApiState, Principal};

const HOUR: Duration = Duration::from_secs(60 * 60);

/// The last day in hours and the last week in quarters of a day.
const DAY: (Duration, usize) = (HOUR, 24);
const WEEK: (Duration, usize) = (Duration::from_secs(6 * 60 * 60), 28);

pub fn routes() -> Router<ApiState> {
    Router::new().route(
        v1!("/app/{app_id}/endpoint/{endpoint_id}/health"),
        get(health),
    )
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EndpointHealthOut {
    endpoint_id: String,
    disabled: bool,
    disabled_reason: Option<String>,
    disabled_at: Option<String>,
    /// The endpoint's own ceiling on attempts in flight, if it has one.
    max_concurrency: Option<u16>,
    /// Now, in this process's engine (null when it has no work for the endpoint).
    concurrency_limit: Option<usize>,
    in_flight: Option<usize>,
    oldest_pending: Option<OldestPendingOut>,
    day: WindowOut,
    week: WindowOut,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OldestPendingOut {
    msg_id: String,
    created_at: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WindowOut {
    since: String,
    until: String,
    bucket_seconds: u64,
    /// Totals of the buckets.
    attempts: u64,
    successful_attempts: u64,
    /// `successfulAttempts / attempts`; null without attempts.
    success_rate: Option<f64>,
    pending: u64,
    buckets: Vec<BucketOut>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BucketOut {
    start: String,
    success: u64,
    failure: u64,
    pending: u64,
}

async fn health(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<Json<EndpointHealthOut>, ApiError> {
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    let now = state.clock().now();
    let day = window(&state, &ep, window_ending_at(now, DAY)).await?;
    let week = window(&state, &ep, window_ending_at(now, WEEK)).await?;
    let oldest = state.store().oldest_pending(&ep).await?;
    let concurrency = state.endpoint_concurrency(&ep.id);
    Ok(Json(EndpointHealthOut {
        endpoint_id: ep.id.to_string(),
        disabled: ep.disabled,
        disabled_reason: ep.disabled_reason,
        disabled_at: ep.disabled_at.map(Timestamp::to_rfc3339),
        max_concurrency: ep.max_concurrency,
        concurrency_limit: concurrency.map(|c| c.limit),
        in_flight: concurrency.map(|c| c.in_flight),
        oldest_pending: oldest.map(|o| OldestPendingOut {
            msg_id: o.message_id.to_string(),
            created_at: o.created_at.to_rfc3339(),
        }),
        day,
        week,
    }))
}

/// `count` slices of `bucket`, the last of which holds `now`.
fn window_ending_at(now: Timestamp, (bucket, count): (Duration, usize)) -> HealthWindow {
    let size = i64::try_from(bucket.as_millis()).unwrap_or(i64::MAX);
    let end = (now.as_millis().div_euclid(size) + 1) * size;
    let span = size * i64::try_from(count).unwrap_or(i64::MAX);
    HealthWindow {
        since: Timestamp::from_millis(end - span),
        bucket,
        buckets: count,
    }
}

async fn window(
    state: &ApiState,
    ep: &Endpoint,
    window: HealthWindow,
) -> Result<WindowOut, ApiError> {
    let buckets = state.store().endpoint_history(ep, &window).await?;
    let sum = |of: fn(&HealthBucket) -> u64| buckets.iter().map(of).sum::<u64>();
    let (succeeded, failed) = (sum(|b| b.succeeded), sum(|b| b.failed));
    let attempts = succeeded + failed;
    let starts = (0u32..).map(|i| window.since.plus(window.bucket * i));
    Ok(WindowOut {
        since: window.since.to_rfc3339(),
        until: window.until().to_rfc3339(),
        bucket_seconds: window.bucket.as_secs(),
        attempts,
        successful_attempts: succeeded,
        success_rate: (attempts > 0).then(|| succeeded as f64 / attempts as f64),
        pending: sum(|b| b.pending),
        buckets: buckets
            .iter()
            .zip(starts)
            .map(|(b, start)| BucketOut {
                start: start.to_rfc3339(),
                success: b.succeeded,
                failure: b.failed,
                pending: b.pending,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::described::assert_shows_as_described;

    #[test]
    fn the_answer_shows_what_the_openapi_document_describes() {
        let at = "2026-03-04T10:00:00Z".to_owned();
        let bucket = BucketOut {
            start: at.clone(),
            success: 1,
            failure: 2,
            pending: 3,
        };
        assert_shows_as_described("EndpointHealthBucket", &bucket);
        let window = || WindowOut {
            since: at.clone(),
            until: at.clone(),
            bucket_seconds: 3600,
            attempts: 3,
            successful_attempts: 1,
            success_rate: Some(1.0 / 3.0),
            pending: 3,
            buckets: Vec::new(),
        };
        assert_shows_as_described("EndpointHealthWindow", &window());
        let oldest = OldestPendingOut {
            msg_id: "msg_1".into(),
            created_at: at.clone(),
        };
        assert_shows_as_described("EndpointHealthOldestPending", &oldest);
        let health = EndpointHealthOut {
            endpoint_id: "ep_1".into(),
            disabled: true,
            disabled_reason: Some("paused".into()),
            disabled_at: Some(at.clone()),
            max_concurrency: Some(4),
            concurrency_limit: Some(2),
            in_flight: Some(1),
            oldest_pending: Some(oldest),
            day: window(),
            week: window(),
        };
        assert_shows_as_described("EndpointHealthOut", &health);
    }

    #[test]
    fn the_last_slice_holds_now_and_slices_start_on_the_hour() {
        let now = Timestamp::parse_rfc3339("2026-03-04T10:20:00Z").unwrap();
        let day = window_ending_at(now, DAY);
        assert_eq!(day.since.to_rfc3339(), "2026-03-03T11:00:00Z");
        assert_eq!(day.until().to_rfc3339(), "2026-03-04T11:00:00Z");
        let week = window_ending_at(now, WEEK);
        assert_eq!(week.since.to_rfc3339(), "2026-02-25T12:00:00Z");
        assert_eq!(week.until().to_rfc3339(), "2026-03-04T12:00:00Z");
    }
}
