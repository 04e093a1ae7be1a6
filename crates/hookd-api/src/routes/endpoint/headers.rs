//! The custom headers sent with every delivery to an endpoint: read, replaced (PUT) and merged
//! (PATCH).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};

use super::crud::save;
use super::find;
use super::models::{HeadersIn, HeadersOut, HeadersPatch};
use crate::extract::JsonBody;
use crate::{ApiError, ApiState, Principal, validate};

pub(super) async fn headers(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<Json<HeadersOut>, ApiError> {
    let ep = find(&state, &principal, &app_id, &endpoint_id).await?;
    Ok(Json(HeadersOut {
        headers: ep.headers,
        sensitive: Vec::new(),
    }))
}

pub(super) async fn replace_headers(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<HeadersIn>,
) -> Result<StatusCode, ApiError> {
    let mut ep = find(&state, &principal, &app_id, &endpoint_id).await?;
    validate::custom_headers("headers", &input.headers)?;
    ep.headers = input.headers;
    let read = ep.disabled;
    save(&state, ep, read, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// PATCH merges: a string sets a header, `null` removes it.
pub(super) async fn patch_headers(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<HeadersPatch>,
) -> Result<StatusCode, ApiError> {
    let mut ep = find(&state, &principal, &app_id, &endpoint_id).await?;
    for (name, value) in input.headers {
        match value {
            Some(value) => ep.headers.insert(name, value),
            None => ep.headers.remove(&name),
        };
    }
    validate::custom_headers("headers", &ep.headers)?;
    let read = ep.disabled;
    save(&state, ep, read, None).await?;
    Ok(StatusCode::NO_CONTENT)
}
