//! An endpoint's signing keys: shown (the current secret or public key), rotated, and changed
//! under the store's compare-and-swap.
//!
//! Keys are sealed before they reach the store and opened only to show the current secret or
//! public key, or to change them; every change goes through the compare-and-swap, so two
//! rotations racing never lose one.

use axum::extract::{Path, State};
use axum::{Extension, Json};
use hookd_core::EndpointId;
use hookd_core::model::{Endpoint, SealedKeys};
use hookd_vault::EndpointKeys;

use super::find_http;
use super::models::{RotateIn, SecretOut};
use crate::auth::Caller;
use crate::extract::JsonBody;
use crate::{ApiError, ApiState, Principal};

/// The endpoint's keys in the clear (in memory only).
pub(crate) fn open_keys(state: &ApiState, ep: &Endpoint) -> Result<EndpointKeys, ApiError> {
    open(state, &ep.id, &ep.keys)
}

/// `sealed`, the keys of endpoint `id`, in the clear.
fn open(state: &ApiState, id: &EndpointId, sealed: &SealedKeys) -> Result<EndpointKeys, ApiError> {
    EndpointKeys::open(state.keyring(), id, sealed)
        .map_err(|e| ApiError::Internal(format!("cannot open the keys of {id}: {e}")))
}

/// How often a key change is tried again after another writer changed the keys first.
pub(super) const KEY_TRIES: usize = 3;

/// Applies `change` to the endpoint's keys and stores them sealed, if nobody changed them
/// meanwhile (then again on what they changed them to: [`KEY_TRIES`] tries, then 409).
async fn change_keys(
    state: &ApiState,
    ep: &Endpoint,
    change: impl Fn(&mut EndpointKeys) -> Result<(), ApiError>,
) -> Result<EndpointKeys, ApiError> {
    let mut sealed = ep.keys.clone();
    for _ in 0..KEY_TRIES {
        let (keys, new) = changed(state, ep, &sealed, &change)?;
        let now = state.clock().now();
        if state
            .store()
            .replace_endpoint_keys(&ep.id, &sealed, &new, now)
            .await?
        {
            return Ok(keys);
        }
        sealed = stored_keys(state, ep).await?;
    }
    Err(keys_kept_changing())
}

/// The keys `sealed` after `change`: in the clear, and sealed.
pub(super) fn changed(
    state: &ApiState,
    ep: &Endpoint,
    sealed: &SealedKeys,
    change: impl Fn(&mut EndpointKeys) -> Result<(), ApiError>,
) -> Result<(EndpointKeys, SealedKeys), ApiError> {
    let mut keys = open(state, &ep.id, sealed)?;
    change(&mut keys)?;
    let new = keys.seal(state.keyring(), &ep.id);
    Ok((keys, new))
}

/// The endpoint's keys as stored now, after another writer changed them.
pub(crate) async fn stored_keys(state: &ApiState, ep: &Endpoint) -> Result<SealedKeys, ApiError> {
    Ok(state
        .store()
        .get_endpoint(&ep.app_id, ep.id.as_str())
        .await?
        .ok_or(ApiError::NotFound("endpoint"))?
        .keys)
}

/// The answer when every try lost to another writer.
pub(super) fn keys_kept_changing() -> ApiError {
    ApiError::Conflict("the endpoint's keys kept changing under this request; retry".into())
}

pub(crate) async fn secret(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Extension(caller): Extension<Caller>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<Json<SecretOut>, ApiError> {
    let ep = find_http(&state, &principal, &app_id, &endpoint_id).await?;
    shown_secret(&state, &caller, &ep).map(Json)
}

/// `ep`'s current secret (or public key), the read noted in the audit log.
pub(crate) fn shown_secret(
    state: &ApiState,
    caller: &Caller,
    ep: &Endpoint,
) -> Result<SecretOut, ApiError> {
    let keys = open_keys(state, ep)?;
    tracing::info!(target: "hookd::audit", action = "secret.read", token_id = %caller.token_id, app_id = %ep.app_id, endpoint_id = %ep.id);
    Ok(SecretOut::from(&keys))
}

/// Makes new keys current; the old ones keep signing beside them for the overlap. Answers with
/// the new secret (as the Svix SDKs read it), or the new public key for a `v1a`-only endpoint.
pub(crate) async fn rotate_secret(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Extension(caller): Extension<Caller>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<RotateIn>,
) -> Result<Json<SecretOut>, ApiError> {
    let ep = find_http(&state, &principal, &app_id, &endpoint_id).await?;
    rotate(&state, &caller, &ep, &input).await.map(Json)
}

/// Rotates `ep`'s keys as `input` asks; the new secret (or public key).
pub(crate) async fn rotate(
    state: &ApiState,
    caller: &Caller,
    ep: &Endpoint,
    input: &RotateIn,
) -> Result<SecretOut, ApiError> {
    let schemes = open_keys(state, ep)?.schemes();
    let (new_keys, overlap) = input.plan(&schemes, state.config().rotation_overlap)?;
    let now = state.clock().now();
    let keys = change_keys(state, ep, |keys| {
        for key in &new_keys {
            keys.rotate(key, now, overlap);
        }
        Ok(())
    })
    .await?;
    tracing::info!(target: "hookd::audit", action = "secret.rotate", token_id = %caller.token_id, app_id = %ep.app_id, endpoint_id = %ep.id, overlap_secs = overlap.as_secs());
    Ok(SecretOut::from(&keys))
}
