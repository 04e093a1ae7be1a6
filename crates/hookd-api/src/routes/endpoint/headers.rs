//! The custom headers sent with every delivery to an endpoint: read, replaced (PUT) and merged
//! (PATCH).
//!
//! Headers whose names carry credentials ([`hookd_vault::CredentialHeaders`], extended by
//! `--sensitive-header`) are sealed with the endpoint's keys, the others kept in clear on its
//! row. An admin token that may write reads them all; every other token (app-scoped, portal,
//! read-only) reads the credential ones by name only, in `sensitive`, as Svix shows them.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use hookd_core::model::Endpoint;

use super::crud::save;
use super::find_http;
use super::models::{HeadersIn, HeadersOut, HeadersPatch, SealedChange};
use super::secret::open_keys;
use crate::auth::Caller;
use crate::extract::JsonBody;
use crate::{ApiError, ApiState, Principal, validate};

/// Puts the clear ones of `headers` on `ep`; returns the credential ones, to be sealed.
pub(crate) fn place(
    state: &ApiState,
    ep: &mut Endpoint,
    headers: BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let (clear, credentials) = state.config().credential_headers.split(headers);
    ep.headers = clear;
    credentials
}

/// Every header of `ep`, the sealed ones opened.
fn all_headers(state: &ApiState, ep: &Endpoint) -> Result<BTreeMap<String, String>, ApiError> {
    let keys = open_keys(state, ep)?;
    let mut all = ep.headers.clone();
    all.extend(keys.headers().clone());
    Ok(all)
}

pub(crate) async fn headers(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Extension(caller): Extension<Caller>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<Json<HeadersOut>, ApiError> {
    let ep = find_http(&state, &principal, &app_id, &endpoint_id).await?;
    if principal == Principal::Admin && !caller.read_only {
        return Ok(Json(HeadersOut {
            headers: all_headers(&state, &ep)?,
            sensitive: Vec::new(),
        }));
    }
    let sealed = open_keys(&state, &ep)?.headers().clone();
    // Clear headers the rule covers now (a name the operator added since they were written)
    // are withheld too.
    let (headers, withheld) = state.config().credential_headers.split(ep.headers);
    let mut sensitive: Vec<String> = sealed.into_keys().chain(withheld.into_keys()).collect();
    sensitive.sort_unstable();
    sensitive.dedup();
    Ok(Json(HeadersOut { headers, sensitive }))
}

pub(crate) async fn replace_headers(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<HeadersIn>,
) -> Result<StatusCode, ApiError> {
    let ep = find_http(&state, &principal, &app_id, &endpoint_id).await?;
    validate::custom_headers("headers", &input.headers)?;
    save_headers(&state, ep, input.headers).await
}

/// PATCH merges: a string sets a header, `null` removes it.
pub(crate) async fn patch_headers(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<HeadersPatch>,
) -> Result<StatusCode, ApiError> {
    let ep = find_http(&state, &principal, &app_id, &endpoint_id).await?;
    let mut headers = all_headers(&state, &ep)?;
    for (name, value) in input.headers {
        match value {
            Some(value) => headers.insert(name, value),
            None => headers.remove(&name),
        };
    }
    validate::custom_headers("headers", &headers)?;
    save_headers(&state, ep, headers).await
}

/// Stores `headers` as the endpoint's whole set: the clear ones on its row, the credential ones
/// sealed with its keys.
async fn save_headers(
    state: &ApiState,
    mut ep: Endpoint,
    headers: BTreeMap<String, String>,
) -> Result<StatusCode, ApiError> {
    let credentials = place(state, &mut ep, headers);
    let read = ep.disabled;
    let sealed = SealedChange {
        headers: Some(credentials),
        ..SealedChange::default()
    };
    save(state, ep, read, sealed).await?;
    Ok(StatusCode::NO_CONTENT)
}
