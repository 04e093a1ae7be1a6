//! Sending again: resend one message to one endpoint (same `webhook-id`), and recover an
//! endpoint's failed messages since a time. Both only queue work; the engine sends it.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Extension, Json, Router};
use hookd_core::{TaskId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::extract::JsonBody;
use crate::routes::{endpoint, message};
use crate::{ApiError, ApiState, Principal};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(
            "/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/resend",
            post(resend),
        )
        .route(
            "/app/{app_id}/endpoint/{endpoint_id}/recover",
            post(recover),
        )
}

async fn resend(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, msg_id, endpoint_id)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let msg = message::find(&state, &principal, &app_id, &msg_id).await?;
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    if state
        .store()
        .resend(&msg.id, &ep.id, state.clock().now())
        .await?
    {
        state.wake_engine();
    }
    Ok(StatusCode::ACCEPTED)
}

#[derive(Deserialize)]
struct RecoverIn {
    since: String,
    until: Option<String>,
}

/// Svix answers recover with a background task; hookd's finishes before it answers.
#[derive(Serialize)]
struct RecoverOut {
    id: String,
    status: &'static str,
    task: &'static str,
    /// hookd addition: how many failed deliveries were queued again.
    recovered: u64,
}

fn time_field(field: &str, value: &str) -> Result<Timestamp, ApiError> {
    Timestamp::parse_rfc3339(value).map_err(|e| ApiError::body_field(field, e.to_string()))
}

async fn recover(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<RecoverIn>,
) -> Result<(StatusCode, Json<RecoverOut>), ApiError> {
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    let since = time_field("since", &input.since)?;
    let until = input
        .until
        .as_deref()
        .map(|u| time_field("until", u))
        .transpose()?;
    let now = state.clock().now();
    let recovered = state.store().recover(&ep.id, since, until, now).await?;
    if recovered > 0 {
        state.wake_engine();
    }
    let out = RecoverOut {
        id: TaskId::new(now).to_string(),
        status: "finished",
        task: "endpoint.recover",
        recovered,
    };
    Ok((StatusCode::ACCEPTED, Json(out)))
}
