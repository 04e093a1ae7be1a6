//! `/ingest/api/v1/source/{source_id}/endpoint`: where a source forwards. These are the
//! endpoints of the application the source owns, so each route here is the endpoint route of
//! that application (`/api/v1/app/{app_id}/endpoint/…`): the same checks, answers, signing and
//! audit lines, and a customer's token reaches only its own source's.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Extension, Json};

use super::source::visible;
use crate::auth::Caller;
use crate::extract::{JsonBody, QueryParams};
use crate::list::ListOut;
use crate::routes::endpoint::models::{
    EndpointIn, EndpointOut, HeadersIn, HeadersOut, HeadersPatch, RotateIn, SecretOut,
};
use crate::routes::endpoint::{crud, headers, secret};
use crate::{ApiError, ApiState, Principal};

/// The application path of the source's endpoint routes, if `principal` may see the source
/// (another customer's source answers exactly as a missing one).
async fn app_of(
    state: &ApiState,
    principal: &Principal,
    source_id: &str,
) -> Result<Path<String>, ApiError> {
    Ok(Path(
        visible(state, principal, source_id)
            .await?
            .app_id
            .to_string(),
    ))
}

/// The application path of the source's endpoint `endpoint_id`.
async fn endpoint_of(
    state: &ApiState,
    principal: &Principal,
    (source_id, endpoint_id): (String, String),
) -> Result<Path<(String, String)>, ApiError> {
    let Path(app) = app_of(state, principal, &source_id).await?;
    Ok(Path((app, endpoint_id)))
}

pub(super) async fn list(
    State(state): State<ApiState>,
    principal: Extension<Principal>,
    Path(source_id): Path<String>,
    query: QueryParams,
) -> Result<Json<ListOut<EndpointOut>>, ApiError> {
    let app = app_of(&state, &principal.0, &source_id).await?;
    crud::list(State(state), principal, app, query).await
}

pub(super) async fn create(
    State(state): State<ApiState>,
    principal: Extension<Principal>,
    Path(source_id): Path<String>,
    input: JsonBody<EndpointIn>,
) -> Result<Response, ApiError> {
    let app = app_of(&state, &principal.0, &source_id).await?;
    crud::create(State(state), principal, app, input).await
}

pub(super) async fn fetch(
    State(state): State<ApiState>,
    principal: Extension<Principal>,
    Path(path): Path<(String, String)>,
) -> Result<Json<EndpointOut>, ApiError> {
    let path = endpoint_of(&state, &principal.0, path).await?;
    crud::fetch(State(state), principal, path).await
}

pub(super) async fn upsert(
    State(state): State<ApiState>,
    principal: Extension<Principal>,
    Path(path): Path<(String, String)>,
    input: JsonBody<EndpointIn>,
) -> Result<Response, ApiError> {
    let path = endpoint_of(&state, &principal.0, path).await?;
    crud::upsert(State(state), principal, path, input).await
}

pub(super) async fn remove(
    State(state): State<ApiState>,
    principal: Extension<Principal>,
    Path(path): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let path = endpoint_of(&state, &principal.0, path).await?;
    crud::remove(State(state), principal, path).await
}

pub(super) async fn get_secret(
    State(state): State<ApiState>,
    principal: Extension<Principal>,
    caller: Extension<Caller>,
    Path(path): Path<(String, String)>,
) -> Result<Json<SecretOut>, ApiError> {
    let path = endpoint_of(&state, &principal.0, path).await?;
    secret::secret(State(state), principal, caller, path).await
}

pub(super) async fn rotate_secret(
    State(state): State<ApiState>,
    principal: Extension<Principal>,
    caller: Extension<Caller>,
    Path(path): Path<(String, String)>,
    input: JsonBody<RotateIn>,
) -> Result<Json<SecretOut>, ApiError> {
    let path = endpoint_of(&state, &principal.0, path).await?;
    secret::rotate_secret(State(state), principal, caller, path, input).await
}

pub(super) async fn get_headers(
    State(state): State<ApiState>,
    principal: Extension<Principal>,
    caller: Extension<Caller>,
    Path(path): Path<(String, String)>,
) -> Result<Json<HeadersOut>, ApiError> {
    let path = endpoint_of(&state, &principal.0, path).await?;
    headers::headers(State(state), principal, caller, path).await
}

pub(super) async fn replace_headers(
    State(state): State<ApiState>,
    principal: Extension<Principal>,
    Path(path): Path<(String, String)>,
    input: JsonBody<HeadersIn>,
) -> Result<StatusCode, ApiError> {
    let path = endpoint_of(&state, &principal.0, path).await?;
    headers::replace_headers(State(state), principal, path, input).await
}

pub(super) async fn patch_headers(
    State(state): State<ApiState>,
    principal: Extension<Principal>,
    Path(path): Path<(String, String)>,
    input: JsonBody<HeadersPatch>,
) -> Result<StatusCode, ApiError> {
    let path = endpoint_of(&state, &principal.0, path).await?;
    headers::patch_headers(State(state), principal, path, input).await
}
