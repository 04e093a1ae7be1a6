//! The endpoint routes' request and response bodies, the checks on them, and how a body
//! becomes a new [`Endpoint`] or changes one.

use std::collections::BTreeMap;

use hookd_core::model::{Application, Endpoint, Metadata, Ordering};
use hookd_core::{EndpointId, Timestamp};
use hookd_vault::{EndpointKeys, Scheme};
use serde::{Deserialize, Serialize};
use webhook_signature::{Ed25519SecretKey, Secret, SigningKey};

use crate::extract::{metadata, metadata_patch, patch_field};
use crate::operations::DISABLED_THROUGH_API;
use crate::{ApiError, ApiState, validate};

/// The longest endpoint description, in characters.
pub(super) const DESCRIPTION_MAX: usize = 4096;

/// Body of create (POST) and replace (PUT).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EndpointIn {
    url: String,
    #[serde(default)]
    description: String,
    uid: Option<String>,
    #[serde(default)]
    disabled: bool,
    /// Svix's cloud API calls it `filterTypes`.
    #[serde(alias = "filterTypes")]
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    secret: Option<String>,
    #[serde(default, deserialize_with = "metadata")]
    metadata: Metadata,
    headers: Option<BTreeMap<String, String>>,
    #[serde(alias = "rateLimit")]
    throttle_rate: Option<u16>,
    /// hookd addition: this endpoint's attempt timeout, 1..=30 seconds.
    timeout_seconds: Option<u16>,
    /// hookd addition: at most this many attempts in flight to the endpoint, 1..=1000.
    max_concurrency: Option<u16>,
    /// hookd addition: `perKey` (the default) or `strict`.
    ordering: Option<String>,
    /// hookd addition: `v1` (HMAC, the default), `v1a` (ed25519) or both.
    pub(super) signature_schemes: Option<Vec<Scheme>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct EndpointPatch {
    pub(super) url: Option<String>,
    pub(super) description: Option<String>,
    #[serde(default, deserialize_with = "patch_field")]
    pub(super) uid: Option<Option<String>>,
    pub(super) disabled: Option<bool>,
    #[serde(default, alias = "filterTypes", deserialize_with = "patch_field")]
    pub(super) event_types: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "patch_field")]
    pub(super) channels: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "metadata_patch")]
    pub(super) metadata: Option<Metadata>,
    #[serde(default, alias = "rateLimit", deserialize_with = "patch_field")]
    pub(super) throttle_rate: Option<Option<u16>>,
    #[serde(default, deserialize_with = "patch_field")]
    pub(super) timeout_seconds: Option<Option<u16>>,
    #[serde(default, deserialize_with = "patch_field")]
    pub(super) max_concurrency: Option<Option<u16>>,
    pub(super) ordering: Option<String>,
    pub(super) signature_schemes: Option<Vec<Scheme>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointOut {
    pub(super) id: String,
    uid: Option<String>,
    url: String,
    description: String,
    disabled: bool,
    /// Why the endpoint is disabled (by hookd, or through the API), while it is.
    disabled_reason: Option<String>,
    /// When it was disabled (RFC 3339), while it is.
    disabled_at: Option<String>,
    event_types: Option<Vec<String>>,
    /// The same list as `eventTypes`, under the name Svix's cloud API gives it.
    filter_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    throttle_rate: Option<u16>,
    rate_limit: Option<u16>,
    /// hookd addition: the attempt timeout in seconds, when not the server's default.
    timeout_seconds: Option<u16>,
    /// hookd addition: the endpoint's own ceiling on attempts in flight, if it has one.
    max_concurrency: Option<u16>,
    /// hookd addition: which messages it receives one at a time, in publish order.
    ordering: &'static str,
    metadata: Metadata,
    created_at: String,
    updated_at: String,
    /// hookd addition: the schemes the endpoint signs with (shown by the endpoint routes).
    #[serde(skip_serializing_if = "Option::is_none")]
    signature_schemes: Option<Vec<Scheme>>,
    /// hookd addition: the `whpk_` key receivers verify `v1a` with, if it signs `v1a`.
    #[serde(skip_serializing_if = "Option::is_none")]
    public_key: Option<String>,
}

impl EndpointOut {
    /// The endpoint with its schemes and public key, from its opened keys.
    pub(super) fn with_keys(ep: Endpoint, keys: &EndpointKeys) -> Self {
        Self {
            signature_schemes: Some(keys.schemes()),
            public_key: keys.public_key().map(|k| k.to_string()),
            ..ep.into()
        }
    }
}

impl From<Endpoint> for EndpointOut {
    fn from(ep: Endpoint) -> Self {
        Self {
            id: ep.id.to_string(),
            uid: ep.uid,
            url: ep.url,
            description: ep.description,
            disabled: ep.disabled,
            disabled_reason: ep.disabled_reason,
            disabled_at: ep.disabled_at.map(|t| t.to_rfc3339()),
            filter_types: ep.event_types.clone(),
            event_types: ep.event_types,
            channels: ep.channels,
            throttle_rate: ep.throttle_rate,
            rate_limit: ep.throttle_rate,
            timeout_seconds: ep.timeout_secs,
            max_concurrency: ep.max_concurrency,
            ordering: ep.ordering.as_str(),
            metadata: ep.metadata,
            created_at: ep.created_at.to_rfc3339(),
            updated_at: ep.updated_at.to_rfc3339(),
            signature_schemes: None,
            public_key: None,
        }
    }
}

impl EndpointIn {
    pub(super) fn validate(&self, state: &ApiState) -> Result<(), ApiError> {
        validate::endpoint_url("url", &self.url, state.config().allow_http_endpoints)?;
        validate::line("description", &self.description, DESCRIPTION_MAX)?;
        validate::uid("uid", self.uid.as_deref())?;
        validate::event_types("eventTypes", self.event_types.as_deref())?;
        validate::channels("channels", self.channels.as_deref())?;
        if let Some(headers) = &self.headers {
            validate::custom_headers("headers", headers)?;
        }
        validate::timeout_seconds("timeoutSeconds", self.timeout_seconds)?;
        validate::max_concurrency("maxConcurrency", self.max_concurrency)?;
        self.ordering()?;
        validate::throttle_rate("throttleRate", self.throttle_rate)?;
        if let Some(schemes) = &self.signature_schemes {
            schemes_field(schemes)?;
        }
        Ok(())
    }

    /// The ordering asked for (`perKey` when not given).
    fn ordering(&self) -> Result<Ordering, ApiError> {
        self.ordering
            .as_deref()
            .map_or(Ok(Ordering::PerKey), validate::ordering)
    }

    /// The new endpoint's keys: one per scheme asked for (`v1` alone by default), the
    /// caller's secret as the `v1` key if given.
    fn keys(&self) -> Result<EndpointKeys, ApiError> {
        let secret = match &self.secret {
            None => None,
            Some(text) => Some(
                Secret::parse_endpoint(text)
                    .map_err(|e| ApiError::body_field("secret", e.to_string()))?,
            ),
        };
        let schemes = self.signature_schemes.as_deref().unwrap_or(&[Scheme::V1]);
        if secret.is_some() && !schemes.contains(&Scheme::V1) {
            return Err(ApiError::body_field(
                "secret",
                "a whsec_ secret is for v1; this endpoint does not sign v1",
            ));
        }
        EndpointKeys::new(schemes, secret)
            .map_err(|e| ApiError::body_field("signatureSchemes", e.to_string()))
    }

    pub(super) fn into_new(
        self,
        app: &Application,
        state: &ApiState,
    ) -> Result<Endpoint, ApiError> {
        let now = state.clock().now();
        let id = EndpointId::new(now);
        let ordering = self.ordering()?;
        let mut keys = self.keys()?;
        let rule = &state.config().credential_headers;
        let (headers, credentials) = rule.split(self.headers.unwrap_or_default());
        keys.set_headers(credentials);
        let keys = keys.seal(state.keyring(), &id);
        let mut ep = Endpoint {
            id,
            app_id: app.id.clone(),
            uid: self.uid,
            url: self.url,
            description: self.description,
            event_types: self.event_types,
            channels: self.channels,
            disabled: false,
            disabled_reason: None,
            disabled_at: None,
            throttle_rate: self.throttle_rate,
            timeout_secs: self.timeout_seconds,
            max_concurrency: self.max_concurrency,
            ordering,
            metadata: self.metadata,
            headers,
            keys,
            created_at: now,
            updated_at: now,
            destination: Default::default(),
            batch_size: 1,
            max_wait_secs: 0,
        };
        set_disabled(&mut ep, self.disabled, now);
        Ok(ep)
    }

    /// Writes the body's fields onto `ep`, but for its headers: those are returned, for
    /// [`super::headers::place`] to split between `ep` and its sealed keys.
    pub(super) fn apply_to(
        self,
        ep: &mut Endpoint,
        now: Timestamp,
    ) -> Result<Option<BTreeMap<String, String>>, ApiError> {
        ep.ordering = self.ordering()?;
        ep.url = self.url;
        ep.description = self.description;
        ep.uid = self.uid;
        set_disabled(ep, self.disabled, now);
        ep.event_types = self.event_types;
        ep.channels = self.channels;
        ep.metadata = self.metadata;
        ep.throttle_rate = self.throttle_rate;
        ep.timeout_secs = self.timeout_seconds;
        ep.max_concurrency = self.max_concurrency;
        Ok(self.headers)
    }
}

/// `signatureSchemes` must name at least one scheme.
pub(super) fn schemes_field(schemes: &[Scheme]) -> Result<(), ApiError> {
    if schemes.is_empty() {
        return Err(ApiError::body_field(
            "signatureSchemes",
            "name at least one of v1, v1a",
        ));
    }
    Ok(())
}

/// Disables or enables `ep` as the API asks. Disabling an enabled endpoint notes why and when;
/// an endpoint already disabled keeps its reason (hookd's, say "410 Gone"); enabling clears
/// both.
pub(crate) fn set_disabled(ep: &mut Endpoint, disabled: bool, now: Timestamp) {
    if disabled && !ep.disabled {
        ep.disabled_reason = Some(DISABLED_THROUGH_API.to_owned());
        ep.disabled_at = Some(now);
    } else if !disabled {
        ep.disabled_reason = None;
        ep.disabled_at = None;
    }
    ep.disabled = disabled;
}

/// Svix's `EndpointSecretOut`: `key` is the current `whsec_` secret, or for an endpoint that
/// signs `v1a` only, its `whpk_` public key. An ed25519 private key is never shown.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SecretOut {
    key: String,
    /// hookd addition: the `whpk_` key receivers verify `v1a` with, if it signs `v1a`.
    #[serde(skip_serializing_if = "Option::is_none")]
    public_key: Option<String>,
}

impl From<&EndpointKeys> for SecretOut {
    fn from(keys: &EndpointKeys) -> Self {
        let public_key = keys.public_key().map(|k| k.to_string());
        let key = keys
            .secret()
            .map(|s| s.to_string())
            .or_else(|| public_key.clone())
            .unwrap_or_default();
        Self { key, public_key }
    }
}

/// Svix's `EndpointSecretRotateIn`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RotateIn {
    /// The new key: a `whsec_` secret (rotates `v1`) or a `whsk_` ed25519 key (rotates `v1a`);
    /// without one, hookd makes a new key for every scheme the endpoint signs with.
    key: Option<String>,
    /// How long the old key keeps signing beside the new one: 0..=7 days.
    grace_period_seconds: Option<u64>,
}

/// Longest overlap a rotation may ask for, as Svix allows.
const MAX_GRACE: u64 = 7 * 24 * 3600;

impl RotateIn {
    /// The new keys and the overlap, checked against the schemes the endpoint signs with.
    pub(super) fn plan(
        &self,
        schemes: &[Scheme],
        default_overlap: std::time::Duration,
    ) -> Result<(Vec<SigningKey>, std::time::Duration), ApiError> {
        let overlap = match self.grace_period_seconds {
            Some(secs) if secs > MAX_GRACE => {
                return Err(ApiError::body_field(
                    "gracePeriodSeconds",
                    format!("must be between 0 and {MAX_GRACE} (7 days)"),
                ));
            }
            Some(secs) => std::time::Duration::from_secs(secs),
            None => default_overlap,
        };
        let keys = match &self.key {
            None => schemes.iter().map(|s| s.generate()).collect(),
            Some(text) if text.starts_with(webhook_signature::ED25519_SECRET_PREFIX) => {
                let key = Ed25519SecretKey::parse(text)
                    .map_err(|e| ApiError::body_field("key", e.to_string()))?;
                vec![SigningKey::Ed25519(key)]
            }
            Some(text) => {
                let secret = Secret::parse_endpoint(text)
                    .map_err(|e| ApiError::body_field("key", e.to_string()))?;
                vec![SigningKey::Hmac(secret)]
            }
        };
        let unsigned = keys.iter().any(|k| {
            let scheme = match k {
                SigningKey::Hmac(_) => Scheme::V1,
                SigningKey::Ed25519(_) => Scheme::V1a,
            };
            !schemes.contains(&scheme)
        });
        if unsigned {
            return Err(ApiError::body_field(
                "key",
                "this endpoint does not sign with that key's scheme (see signatureSchemes)",
            ));
        }
        Ok((keys, overlap))
    }
}

/// What a change does to an endpoint's sealed keys, under their compare-and-swap: sign with
/// exactly `schemes`, replace its credential headers with `headers` and a destination's
/// credentials with `destination`.
#[derive(Default)]
pub(crate) struct SealedChange {
    pub(crate) schemes: Option<Vec<Scheme>>,
    pub(crate) headers: Option<BTreeMap<String, String>>,
    pub(crate) destination: Option<BTreeMap<String, String>>,
}

impl SealedChange {
    pub(super) fn is_empty(&self) -> bool {
        self.schemes.is_none() && self.headers.is_none() && self.destination.is_none()
    }

    pub(super) fn apply(&self, keys: &mut EndpointKeys) -> Result<(), ApiError> {
        if let Some(secrets) = &self.destination {
            keys.set_destination_secrets(secrets.clone());
        }
        if let Some(schemes) = &self.schemes {
            keys.set_schemes(schemes)
                .map_err(|e| ApiError::body_field("signatureSchemes", e.to_string()))?;
        }
        if let Some(headers) = &self.headers {
            keys.set_headers(headers.clone());
        }
        Ok(())
    }
}

/// Svix's `EndpointHeadersOut`: `sensitive` names the credential headers left out of
/// `headers` (for every token but an admin one that may write).
#[derive(Serialize)]
pub(crate) struct HeadersOut {
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) sensitive: Vec<String>,
}

#[derive(Deserialize)]
pub(crate) struct HeadersIn {
    pub(super) headers: BTreeMap<String, String>,
}

#[derive(Deserialize)]
pub(crate) struct HeadersPatch {
    pub(super) headers: BTreeMap<String, Option<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::described::{assert_reads_as_described, assert_shows_as_described};

    #[test]
    fn the_openapi_document_describes_every_field_the_endpoint_routes_read() {
        assert_reads_as_described::<EndpointIn>("EndpointIn");
        assert_reads_as_described::<EndpointIn>("EndpointUpdate");
        assert_reads_as_described::<EndpointPatch>("EndpointPatch");
        assert_reads_as_described::<RotateIn>("EndpointSecretRotateIn");
        assert_reads_as_described::<HeadersIn>("EndpointHeadersIn");
        assert_reads_as_described::<HeadersPatch>("EndpointHeadersPatchIn");
    }

    #[test]
    fn the_openapi_document_describes_every_field_the_endpoint_routes_show() {
        let some = |s: &str| Some(s.to_owned());
        let endpoint = EndpointOut {
            id: "ep_1".into(),
            uid: some("shop"),
            url: "https://example.com/hook".into(),
            description: String::new(),
            disabled: true,
            disabled_reason: some(DISABLED_THROUGH_API),
            disabled_at: some("2026-01-01T00:00:00+00:00"),
            event_types: Some(vec!["user.signup".into()]),
            filter_types: Some(vec!["user.signup".into()]),
            channels: Some(vec!["project_1".into()]),
            throttle_rate: Some(5),
            rate_limit: Some(5),
            timeout_seconds: Some(10),
            max_concurrency: Some(8),
            ordering: "strict",
            metadata: Metadata::new(),
            created_at: "2026-01-01T00:00:00+00:00".into(),
            updated_at: "2026-01-01T00:00:00+00:00".into(),
            signature_schemes: Some(vec![Scheme::V1, Scheme::V1a]),
            public_key: some("whpk_x"),
        };
        assert_shows_as_described("EndpointOut", &endpoint);
        let secret = SecretOut {
            key: "whsec_x".into(),
            public_key: some("whpk_x"),
        };
        assert_shows_as_described("EndpointSecretOut", &secret);
        let headers = HeadersOut {
            headers: BTreeMap::new(),
            sensitive: Vec::new(),
        };
        assert_shows_as_described("EndpointHeadersOut", &headers);
    }
}
