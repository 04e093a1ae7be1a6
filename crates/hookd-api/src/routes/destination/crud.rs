//! Listing, creating, reading, replacing (PUT), patching and deleting destinations, and
//! reading and rotating a destination's signing secret. Every change tells the operator as an
//! endpoint's does (`endpoint.created`, `endpoint.updated`, `endpoint.deleted`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use hookd_core::EndpointId;
use hookd_core::destination::Destination;
use hookd_core::model::Endpoint;

use super::find;
use super::models::{DestinationIn, DestinationOut, DestinationPatch};
use crate::auth::Caller;
use crate::extract::{JsonBody, QueryParams};
use crate::list::{ListOut, page_request};
use crate::routes::endpoint::{self, RotateIn, SecretOut, delete, insert, open_keys, save};
use crate::{ApiError, ApiState, Principal, validate};

/// The destination as the destination routes show it.
fn shown(state: &ApiState, ep: Endpoint) -> Result<DestinationOut, ApiError> {
    let keys = open_keys(state, &ep)?;
    Ok(DestinationOut::new(ep, &keys))
}

pub(super) async fn list(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
    query: QueryParams,
) -> Result<Json<ListOut<DestinationOut>>, ApiError> {
    let app = state.app(&principal, &app_id).await?;
    // The official SDKs fail to read a list holding a type they do not know.
    let extended = query.flag("extended", false)?;
    let page = state
        .store()
        .list_destinations(&app.id, &page_request(&query)?, extended)
        .await?;
    let list = ListOut::of_endpoints(page, |ep| shown(&state, ep))?;
    Ok(Json(list))
}

pub(super) async fn create(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
    JsonBody(input): JsonBody<DestinationIn>,
) -> Result<Response, ApiError> {
    let app = state.app(&principal, &app_id).await?;
    let parsed = input.parse(&state)?;
    let supplied = parsed.key.is_some();
    let ep = input.into_new(parsed, &app, &state)?;
    if supplied {
        endpoint::refuse_supplied_secret(&state, &ep, "config.key").await?;
    }
    insert(&state, &ep, "type").await?;
    Ok((StatusCode::CREATED, Json(shown(&state, ep)?)).into_response())
}

pub(super) async fn fetch(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, destination_id)): Path<(String, String)>,
) -> Result<Json<DestinationOut>, ApiError> {
    let ep = find(&state, &principal, &app_id, &destination_id).await?;
    Ok(Json(shown(&state, ep)?))
}

/// PUT replaces the destination, or creates it (with the path as its uid) when missing.
pub(super) async fn upsert(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, destination_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<DestinationIn>,
) -> Result<Response, ApiError> {
    let app = state.app(&principal, &app_id).await?;
    let parsed = input.parse(&state)?;
    match state.store().get_endpoint(&app.id, &destination_id).await? {
        Some(ep) if ep.destination == Destination::Http => Err(ApiError::Conflict(format!(
            "{destination_id} is an endpoint of this application; change it through its \
             endpoint routes"
        ))),
        Some(mut ep) => {
            let read = ep.disabled;
            let sealed = input.replace(parsed, &mut ep, &state)?;
            let (ep, keys) = save(&state, ep, read, sealed).await?;
            Ok(Json(DestinationOut::new(ep, &keys)).into_response())
        }
        None if EndpointId::looks_like(&destination_id) => Err(ApiError::NotFound("destination")),
        None => {
            validate::name("uid", &destination_id)?;
            let supplied = parsed.key.is_some();
            let mut ep = input.into_new(parsed, &app, &state)?;
            ep.uid = Some(destination_id);
            if supplied {
                endpoint::refuse_supplied_secret(&state, &ep, "config.key").await?;
            }
            insert(&state, &ep, "type").await?;
            Ok((StatusCode::CREATED, Json(shown(&state, ep)?)).into_response())
        }
    }
}

pub(super) async fn patch(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, destination_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<DestinationPatch>,
) -> Result<Json<DestinationOut>, ApiError> {
    let mut ep = find(&state, &principal, &app_id, &destination_id).await?;
    let read = ep.disabled;
    let keys = open_keys(&state, &ep)?;
    let sealed = input.apply(&mut ep, &keys, &state)?;
    let (ep, keys) = save(&state, ep, read, sealed).await?;
    Ok(Json(DestinationOut::new(ep, &keys)))
}

pub(super) async fn remove(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, destination_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let ep = find(&state, &principal, &app_id, &destination_id).await?;
    delete(&state, &ep).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The destination's signing secret (hookd addition: every destination signs what it
/// carries, a polling destination's consumer verifies with it).
pub(super) async fn secret(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Extension(caller): Extension<Caller>,
    Path((app_id, destination_id)): Path<(String, String)>,
) -> Result<Json<SecretOut>, ApiError> {
    let ep = find(&state, &principal, &app_id, &destination_id).await?;
    endpoint::shown_secret(&state, &caller, &ep).await.map(Json)
}

/// The destination's secret rotated, as the endpoint route rotates one (Svix answers
/// `DestinationSecretRotateOut {key}`).
pub(super) async fn rotate_secret(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Extension(caller): Extension<Caller>,
    Path((app_id, destination_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<RotateIn>,
) -> Result<Json<SecretOut>, ApiError> {
    let ep = find(&state, &principal, &app_id, &destination_id).await?;
    endpoint::rotate(&state, &caller, &ep, &input)
        .await
        .map(Json)
}
