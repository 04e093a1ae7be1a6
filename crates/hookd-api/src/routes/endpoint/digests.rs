//! What the digests of endpoints' signing keys (see [`hookd_store::KeyDigestStore`]) enforce:
//! a key supplied by the caller that another endpoint holds is refused, so a leaked secret
//! forges one endpoint's webhooks only; and with `--secrets-shown-once`, a secret is answered
//! once after it is made.

use hookd_core::EndpointId;
use hookd_core::model::Endpoint;
use hookd_vault::{EndpointKeys, key_text};
use webhook_signature::SigningKey;

use super::secret::open_keys;
use crate::{ApiError, ApiState};

/// Refuses `key`, supplied in the body's `field` for endpoint `endpoint`, if another endpoint
/// (of any application) holds it.
pub(crate) async fn refuse_held_elsewhere(
    state: &ApiState,
    endpoint: &EndpointId,
    key: &SigningKey,
    field: &str,
) -> Result<(), ApiError> {
    let digest = state.keyring().digest(&key_text(key));
    if state
        .store()
        .key_held_elsewhere(&digest.hex, endpoint)
        .await?
    {
        return Err(ApiError::body_field(
            field,
            "this key is already used by another endpoint; every endpoint needs a key of its \
             own (leave it out and hookd makes one)",
        ));
    }
    Ok(())
}

/// Refuses the new endpoint `ep` if its secret, supplied in the body's `field`, is held by
/// another endpoint.
pub(crate) async fn refuse_supplied_secret(
    state: &ApiState,
    ep: &Endpoint,
    field: &str,
) -> Result<(), ApiError> {
    match open_keys(state, ep)?.secret() {
        Some(secret) => {
            refuse_held_elsewhere(state, &ep.id, &SigningKey::Hmac(secret), field).await
        }
        None => Ok(()),
    }
}

/// Records the digests of `keys`, the endpoint's keys as just written. A failure is logged,
/// not answered: the keys are written, and a caller retrying would make a second endpoint or
/// rotate again. What is missing is only a key the reuse check does not know of until the
/// next start digests the endpoints that have none.
pub(crate) async fn record(state: &ApiState, endpoint: &EndpointId, keys: &EndpointKeys) {
    let keyring = state.keyring();
    let digests: Vec<String> = keys
        .digests(keyring)
        .into_iter()
        .map(|digest| digest.hex)
        .collect();
    if let Err(error) = state
        .store()
        .set_key_digests(endpoint, keyring.current_id(), &digests, false)
        .await
    {
        tracing::warn!(endpoint_id = %endpoint, %error, "the endpoint's key digests were not recorded");
    }
}

/// With `--secrets-shown-once`, lets the current secret of `ep` (in `keys`) be answered only
/// if it was never answered before; without it, or for an endpoint with no `whsec_` secret
/// (a public key is no secret), always.
pub(crate) async fn show_once(
    state: &ApiState,
    ep: &Endpoint,
    keys: &EndpointKeys,
) -> Result<(), ApiError> {
    let (true, Some(secret)) = (state.config().secrets_shown_once, keys.secret()) else {
        return Ok(());
    };
    let digest = state.keyring().digest(&secret.to_string());
    let first = state
        .store()
        .mark_key_shown(&ep.id, &digest.key_id, &digest.hex, state.clock().now())
        .await?;
    if first {
        Ok(())
    } else {
        Err(ApiError::Conflict(
            "this endpoint's secret was shown once already and this server shows secrets only \
             once (--secrets-shown-once): rotate it (POST …/secret/rotate) to get a new one"
                .into(),
        ))
    }
}
