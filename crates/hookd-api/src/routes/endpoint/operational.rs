//! `/api/v1/operational-webhook/endpoint`: Svix's API for the endpoints that receive the
//! operational webhooks. In hookd those are the endpoints of the reserved application
//! (`hookd_core::operations::APP_UID`), so each route here is the endpoint route of that
//! application: the same checks, answers and audit lines, and the endpoints stay reachable
//! through `/app/hookd-operations/endpoint` too.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Extension, Json};
use hookd_core::operations::APP_UID;

use super::models::{EndpointIn, EndpointOut, HeadersIn, HeadersOut, RotateIn, SecretOut};
use super::{crud, headers, secret};
use crate::auth::Caller;
use crate::extract::{JsonBody, QueryParams};
use crate::list::ListOut;
use crate::{ApiError, ApiState, Principal};

/// The path of the reserved application's endpoint `endpoint_id`.
fn of_operations(endpoint_id: String) -> Path<(String, String)> {
    Path((APP_UID.to_owned(), endpoint_id))
}

pub(super) async fn list(
    state: State<ApiState>,
    principal: Extension<Principal>,
    query: QueryParams,
) -> Result<Json<ListOut<EndpointOut>>, ApiError> {
    crud::list(state, principal, Path(APP_UID.to_owned()), query).await
}

pub(super) async fn create(
    state: State<ApiState>,
    principal: Extension<Principal>,
    input: JsonBody<EndpointIn>,
) -> Result<Response, ApiError> {
    crud::create(state, principal, Path(APP_UID.to_owned()), input).await
}

pub(super) async fn fetch(
    state: State<ApiState>,
    principal: Extension<Principal>,
    Path(endpoint_id): Path<String>,
) -> Result<Json<EndpointOut>, ApiError> {
    crud::fetch(state, principal, of_operations(endpoint_id)).await
}

pub(super) async fn upsert(
    state: State<ApiState>,
    principal: Extension<Principal>,
    Path(endpoint_id): Path<String>,
    input: JsonBody<EndpointIn>,
) -> Result<Response, ApiError> {
    crud::upsert(state, principal, of_operations(endpoint_id), input).await
}

pub(super) async fn remove(
    state: State<ApiState>,
    principal: Extension<Principal>,
    Path(endpoint_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    crud::remove(state, principal, of_operations(endpoint_id)).await
}

pub(super) async fn secret(
    state: State<ApiState>,
    principal: Extension<Principal>,
    caller: Extension<Caller>,
    Path(endpoint_id): Path<String>,
) -> Result<Json<SecretOut>, ApiError> {
    secret::secret(state, principal, caller, of_operations(endpoint_id)).await
}

pub(super) async fn rotate_secret(
    state: State<ApiState>,
    principal: Extension<Principal>,
    caller: Extension<Caller>,
    Path(endpoint_id): Path<String>,
    input: JsonBody<RotateIn>,
) -> Result<Json<SecretOut>, ApiError> {
    secret::rotate_secret(state, principal, caller, of_operations(endpoint_id), input).await
}

pub(super) async fn headers(
    state: State<ApiState>,
    principal: Extension<Principal>,
    caller: Extension<Caller>,
    Path(endpoint_id): Path<String>,
) -> Result<Json<HeadersOut>, ApiError> {
    headers::headers(state, principal, caller, of_operations(endpoint_id)).await
}

pub(super) async fn replace_headers(
    state: State<ApiState>,
    principal: Extension<Principal>,
    Path(endpoint_id): Path<String>,
    input: JsonBody<HeadersIn>,
) -> Result<StatusCode, ApiError> {
    headers::replace_headers(state, principal, of_operations(endpoint_id), input).await
}
