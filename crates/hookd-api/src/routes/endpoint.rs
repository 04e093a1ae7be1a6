//! `/api/v1/app/{app}/endpoint`: the URLs of an application that receive its messages, with
//! their filters, signing keys (read, rotated) and custom headers.
//!
//! Signing keys are sealed here before they reach the store and opened only to show the
//! current secret or public key, or to change them; every change goes through the store's
//! compare-and-swap, so two rotations racing never lose one.
//!
//! Creating, changing and deleting an endpoint tell the operator (`endpoint.created`,
//! `endpoint.updated`, `endpoint.deleted` operational webhooks), in the change's transaction;
//! a change that disables or enables it also tells `endpoint.disabled` (`trigger: "manual"`)
//! or `endpoint.enabled`.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use hookd_core::model::{Application, Endpoint, Message, Metadata};
use hookd_core::operations::{self, DisableTrigger, EndpointRef, OperationalEvent};
use hookd_core::{AppId, EndpointId, Timestamp};
use hookd_store::Page;
use hookd_vault::{EndpointKeys, Scheme};
use serde::{Deserialize, Serialize};
use webhook_signature::{Ed25519SecretKey, Secret, SigningKey};

use crate::auth::Caller;
use crate::extract::{JsonBody, QueryParams, patch_field};
use crate::list::{ListOut, page_request};
use crate::{ApiError, ApiState, Principal, validate};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route("/app/{app_id}/endpoint", get(list).post(create))
        .route(
            "/app/{app_id}/endpoint/{endpoint_id}",
            get(fetch).put(upsert).patch(patch).delete(remove),
        )
        .route("/app/{app_id}/endpoint/{endpoint_id}/secret", get(secret))
        .route(
            "/app/{app_id}/endpoint/{endpoint_id}/secret/rotate",
            post(rotate_secret),
        )
        .route(
            "/app/{app_id}/endpoint/{endpoint_id}/headers",
            get(headers).put(replace_headers).patch(patch_headers),
        )
}

/// Body of create (POST) and replace (PUT).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndpointIn {
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
    #[serde(default)]
    metadata: Metadata,
    headers: Option<BTreeMap<String, String>>,
    #[serde(alias = "rateLimit")]
    throttle_rate: Option<u16>,
    /// hookd addition: this endpoint's attempt timeout, 1..=30 seconds.
    timeout_seconds: Option<u16>,
    /// hookd addition: at most this many attempts in flight to the endpoint, 1..=1000.
    max_concurrency: Option<u16>,
    /// hookd addition: `v1` (HMAC, the default), `v1a` (ed25519) or both.
    signature_schemes: Option<Vec<Scheme>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndpointPatch {
    url: Option<String>,
    description: Option<String>,
    #[serde(default, deserialize_with = "patch_field")]
    uid: Option<Option<String>>,
    disabled: Option<bool>,
    #[serde(default, alias = "filterTypes", deserialize_with = "patch_field")]
    event_types: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "patch_field")]
    channels: Option<Option<Vec<String>>>,
    metadata: Option<Metadata>,
    #[serde(default, alias = "rateLimit", deserialize_with = "patch_field")]
    throttle_rate: Option<Option<u16>>,
    #[serde(default, deserialize_with = "patch_field")]
    timeout_seconds: Option<Option<u16>>,
    #[serde(default, deserialize_with = "patch_field")]
    max_concurrency: Option<Option<u16>>,
    signature_schemes: Option<Vec<Scheme>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointOut {
    id: String,
    uid: Option<String>,
    url: String,
    description: String,
    disabled: bool,
    /// Why the endpoint is disabled (by hookd, or through the API), while it is.
    disabled_reason: Option<String>,
    /// When it was disabled (RFC 3339), while it is.
    disabled_at: Option<String>,
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    throttle_rate: Option<u16>,
    rate_limit: Option<u16>,
    /// hookd addition: the attempt timeout in seconds, when not the server's default.
    timeout_seconds: Option<u16>,
    /// hookd addition: the endpoint's own ceiling on attempts in flight, if it has one.
    max_concurrency: Option<u16>,
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
    fn with_keys(ep: Endpoint, keys: &EndpointKeys) -> Self {
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
            event_types: ep.event_types,
            channels: ep.channels,
            throttle_rate: ep.throttle_rate,
            rate_limit: ep.throttle_rate,
            timeout_seconds: ep.timeout_secs,
            max_concurrency: ep.max_concurrency,
            metadata: ep.metadata,
            created_at: ep.created_at.to_rfc3339(),
            updated_at: ep.updated_at.to_rfc3339(),
            signature_schemes: None,
            public_key: None,
        }
    }
}

impl EndpointIn {
    fn validate(&self, state: &ApiState) -> Result<(), ApiError> {
        validate::endpoint_url("url", &self.url, state.config().allow_http_endpoints)?;
        validate::uid("uid", self.uid.as_deref())?;
        validate::event_types("eventTypes", self.event_types.as_deref())?;
        validate::channels("channels", self.channels.as_deref())?;
        if let Some(headers) = &self.headers {
            validate::custom_headers("headers", headers)?;
        }
        validate::timeout_seconds("timeoutSeconds", self.timeout_seconds)?;
        validate::max_concurrency("maxConcurrency", self.max_concurrency)?;
        validate::throttle_rate("throttleRate", self.throttle_rate)?;
        if let Some(schemes) = &self.signature_schemes {
            schemes_field(schemes)?;
        }
        Ok(())
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

    fn into_new(self, app: &Application, state: &ApiState) -> Result<Endpoint, ApiError> {
        let now = state.clock().now();
        let id = EndpointId::new(now);
        let keys = self.keys()?.seal(state.keyring(), &id);
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
            metadata: self.metadata,
            headers: self.headers.unwrap_or_default(),
            keys,
            created_at: now,
            updated_at: now,
        };
        set_disabled(&mut ep, self.disabled, now);
        Ok(ep)
    }

    fn apply_to(self, ep: &mut Endpoint, now: Timestamp) {
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
        if let Some(headers) = self.headers {
            ep.headers = headers;
        }
    }
}

/// `signatureSchemes` must name at least one scheme.
fn schemes_field(schemes: &[Scheme]) -> Result<(), ApiError> {
    if schemes.is_empty() {
        return Err(ApiError::body_field(
            "signatureSchemes",
            "name at least one of v1, v1a",
        ));
    }
    Ok(())
}

/// Why an endpoint disabled through the API is disabled.
const DISABLED_THROUGH_API: &str = "disabled through the API";

/// Disables or enables `ep` as the API asks. Disabling an enabled endpoint notes why and when;
/// an endpoint already disabled keeps its reason (hookd's, say "410 Gone"); enabling clears
/// both.
fn set_disabled(ep: &mut Endpoint, disabled: bool, now: Timestamp) {
    if disabled && !ep.disabled {
        ep.disabled_reason = Some(DISABLED_THROUGH_API.to_owned());
        ep.disabled_at = Some(now);
    } else if !disabled {
        ep.disabled_reason = None;
        ep.disabled_at = None;
    }
    ep.disabled = disabled;
}

/// The endpoint of an application visible to `principal`, by id or uid.
pub(crate) async fn find(
    state: &ApiState,
    principal: &Principal,
    app_id: &str,
    endpoint_id: &str,
) -> Result<Endpoint, ApiError> {
    let app = state.app(principal, app_id).await?;
    state
        .store()
        .get_endpoint(&app.id, endpoint_id)
        .await?
        .ok_or(ApiError::NotFound("endpoint"))
}

/// Who is told of changes to an endpoint: the operations application, and the endpoint as
/// its events name it.
struct Operator {
    operations: AppId,
    endpoint: EndpointRef,
    at: Timestamp,
}

impl Operator {
    /// The operator to tell of a change to `ep`: none for the operations application's own
    /// endpoints, or when there is no operations application.
    async fn of(state: &ApiState, ep: &Endpoint) -> Result<Option<Self>, ApiError> {
        let Some(operations) = state.store().get_app(operations::APP_UID).await? else {
            return Ok(None);
        };
        if ep.app_id == operations.id {
            return Ok(None);
        }
        let app = state.app(&Principal::Admin, ep.app_id.as_str()).await?;
        Ok(Some(Self {
            operations: operations.id,
            endpoint: EndpointRef::new(&app, ep),
            at: state.clock().now(),
        }))
    }

    /// The message carrying `event` about the endpoint.
    fn tell(&self, event: impl FnOnce(EndpointRef) -> OperationalEvent) -> Message {
        event(self.endpoint.clone()).message(&self.operations, self.at)
    }
}

/// The operational webhook telling of a change to `ep` (`endpoint.created`, …), if anyone is
/// told (see [`Operator::of`]).
async fn told(
    state: &ApiState,
    ep: &Endpoint,
    event: fn(EndpointRef) -> OperationalEvent,
) -> Result<Vec<Message>, ApiError> {
    let operator = Operator::of(state, ep).await?;
    Ok(operator.map(|o| o.tell(event)).into_iter().collect())
}

/// What the operator is told if the change that leaves `ep` as it is disabled or enabled it:
/// Svix's `endpoint.disabled` with `trigger: "manual"` (and the reason the endpoint keeps), or
/// `endpoint.enabled`.
fn toggled(ep: &Endpoint) -> impl FnOnce(EndpointRef) -> OperationalEvent {
    let (disabled, reason) = (ep.disabled, ep.disabled_reason.clone());
    move |endpoint| {
        if !disabled {
            return OperationalEvent::EndpointEnabled(endpoint);
        }
        OperationalEvent::EndpointDisabled {
            endpoint,
            fail_since: None,
            trigger: DisableTrigger::Manual,
            reason: reason.unwrap_or_else(|| DISABLED_THROUGH_API.to_owned()),
        }
    }
}

/// Wakes the engine if operational webhooks were written.
fn wake_for(state: &ApiState, events: &[Message]) {
    if !events.is_empty() {
        state.wake_engine();
    }
}

/// Stores a new endpoint, telling the operator.
async fn insert(state: &ApiState, ep: &Endpoint) -> Result<(), ApiError> {
    let events = told(state, ep, OperationalEvent::EndpointCreated).await?;
    state
        .store()
        .create_endpoint_with_events(ep, &events)
        .await?;
    wake_for(state, &events);
    Ok(())
}

/// Stores a changed endpoint, stamping the change and telling the operator (`endpoint.updated`
/// always; `endpoint.disabled` or `endpoint.enabled` too if the store finds the change disabled
/// or enabled it); with `schemes`, also makes it sign with exactly those. `ep` was built from a
/// read in which the endpoint's `disabled` was `disabled_as_read`: if hookd changed that since,
/// and the change does not ask for a state itself, it is a 409 (see
/// `update_endpoint_with_events`).
async fn save(
    state: &ApiState,
    mut ep: Endpoint,
    disabled_as_read: bool,
    schemes: Option<&[Scheme]>,
) -> Result<EndpointOut, ApiError> {
    ep.updated_at = state.clock().now();
    let (events, on_toggle) = match Operator::of(state, &ep).await? {
        Some(operator) => (
            vec![operator.tell(OperationalEvent::EndpointUpdated)],
            vec![operator.tell(toggled(&ep))],
        ),
        None => (Vec::new(), Vec::new()),
    };
    state
        .store()
        .update_endpoint_with_events(&ep, Some(disabled_as_read), &events, &on_toggle)
        .await?;
    wake_for(state, &events);
    let keys = match schemes {
        Some(schemes) => {
            change_keys(state, &ep, |keys| {
                keys.set_schemes(schemes)
                    .map_err(|e| ApiError::body_field("signatureSchemes", e.to_string()))
            })
            .await?
        }
        None => open_keys(state, &ep)?,
    };
    Ok(EndpointOut::with_keys(ep, &keys))
}

/// The endpoint's keys in the clear (in memory only).
pub(crate) fn open_keys(state: &ApiState, ep: &Endpoint) -> Result<EndpointKeys, ApiError> {
    EndpointKeys::open(state.keyring(), &ep.id, &ep.keys)
        .map_err(|e| ApiError::Internal(format!("cannot open the keys of {}: {e}", ep.id)))
}

/// Applies `change` to the endpoint's keys and stores them sealed, if nobody changed them
/// meanwhile (then again on what they changed them to: a few tries, then 409).
async fn change_keys(
    state: &ApiState,
    ep: &Endpoint,
    change: impl Fn(&mut EndpointKeys) -> Result<(), ApiError>,
) -> Result<EndpointKeys, ApiError> {
    let mut sealed = ep.keys.clone();
    for _ in 0..3 {
        let mut keys = EndpointKeys::open(state.keyring(), &ep.id, &sealed)
            .map_err(|e| ApiError::Internal(format!("cannot open the keys of {}: {e}", ep.id)))?;
        change(&mut keys)?;
        let new = keys.seal(state.keyring(), &ep.id);
        let now = state.clock().now();
        if state
            .store()
            .replace_endpoint_keys(&ep.id, &sealed, &new, now)
            .await?
        {
            return Ok(keys);
        }
        sealed = state
            .store()
            .get_endpoint(&ep.app_id, ep.id.as_str())
            .await?
            .ok_or(ApiError::NotFound("endpoint"))?
            .keys;
    }
    Err(ApiError::Conflict(
        "the endpoint's keys kept changing under this request; retry".into(),
    ))
}

async fn list(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
    query: QueryParams,
) -> Result<Json<ListOut<EndpointOut>>, ApiError> {
    let app = state.app(&principal, &app_id).await?;
    let page = state
        .store()
        .list_endpoints(&app.id, &page_request(&query)?)
        .await?;
    let shown = Page {
        items: page
            .items
            .into_iter()
            .map(|ep| shown(&state, ep))
            .collect::<Result<Vec<_>, _>>()?,
        has_more: page.has_more,
    };
    Ok(Json(ListOut::from_page(shown, |e| e.id.clone(), |e| e)))
}

async fn create(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
    JsonBody(input): JsonBody<EndpointIn>,
) -> Result<Response, ApiError> {
    let app = state.app(&principal, &app_id).await?;
    input.validate(&state)?;
    let ep = input.into_new(&app, &state)?;
    insert(&state, &ep).await?;
    Ok((StatusCode::CREATED, Json(shown(&state, ep)?)).into_response())
}

/// The endpoint as the endpoint routes show it, with its schemes and public key.
fn shown(state: &ApiState, ep: Endpoint) -> Result<EndpointOut, ApiError> {
    let keys = open_keys(state, &ep)?;
    Ok(EndpointOut::with_keys(ep, &keys))
}

async fn fetch(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<Json<EndpointOut>, ApiError> {
    let ep = find(&state, &principal, &app_id, &endpoint_id).await?;
    Ok(Json(shown(&state, ep)?))
}

/// PUT replaces the endpoint, or creates it (with the path as its uid) when missing.
async fn upsert(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<EndpointIn>,
) -> Result<Response, ApiError> {
    let app = state.app(&principal, &app_id).await?;
    input.validate(&state)?;
    match state.store().get_endpoint(&app.id, &endpoint_id).await? {
        Some(mut ep) => {
            let (read, schemes) = (ep.disabled, input.signature_schemes.clone());
            input.apply_to(&mut ep, state.clock().now());
            Ok(Json(save(&state, ep, read, schemes.as_deref()).await?).into_response())
        }
        None if EndpointId::looks_like(&endpoint_id) => Err(ApiError::NotFound("endpoint")),
        None => {
            validate::name("uid", &endpoint_id)?;
            let mut ep = input.into_new(&app, &state)?;
            ep.uid = Some(endpoint_id);
            insert(&state, &ep).await?;
            Ok((StatusCode::CREATED, Json(shown(&state, ep)?)).into_response())
        }
    }
}

async fn patch(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<EndpointPatch>,
) -> Result<Json<EndpointOut>, ApiError> {
    let mut ep = find(&state, &principal, &app_id, &endpoint_id).await?;
    let read = ep.disabled;
    if let Some(url) = input.url {
        validate::endpoint_url("url", &url, state.config().allow_http_endpoints)?;
        ep.url = url;
    }
    if let Some(description) = input.description {
        ep.description = description;
    }
    if let Some(uid) = input.uid {
        validate::uid("uid", uid.as_deref())?;
        ep.uid = uid;
    }
    if let Some(disabled) = input.disabled {
        set_disabled(&mut ep, disabled, state.clock().now());
    }
    if let Some(event_types) = input.event_types {
        validate::event_types("eventTypes", event_types.as_deref())?;
        ep.event_types = event_types;
    }
    if let Some(channels) = input.channels {
        validate::channels("channels", channels.as_deref())?;
        ep.channels = channels;
    }
    if let Some(metadata) = input.metadata {
        ep.metadata = metadata;
    }
    if let Some(rate) = input.throttle_rate {
        ep.throttle_rate = rate;
    }
    if let Some(timeout) = input.timeout_seconds {
        validate::timeout_seconds("timeoutSeconds", timeout)?;
        ep.timeout_secs = timeout;
    }
    if let Some(ceiling) = input.max_concurrency {
        validate::max_concurrency("maxConcurrency", ceiling)?;
        ep.max_concurrency = ceiling;
    }
    if let Some(schemes) = &input.signature_schemes {
        schemes_field(schemes)?;
    }
    Ok(Json(
        save(&state, ep, read, input.signature_schemes.as_deref()).await?,
    ))
}

async fn remove(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let ep = find(&state, &principal, &app_id, &endpoint_id).await?;
    let events = told(&state, &ep, OperationalEvent::EndpointDeleted).await?;
    state
        .store()
        .delete_endpoint_with_events(&ep, &events)
        .await?;
    wake_for(&state, &events);
    Ok(StatusCode::NO_CONTENT)
}

/// Svix's `EndpointSecretOut`: `key` is the current `whsec_` secret, or for an endpoint that
/// signs `v1a` only, its `whpk_` public key. An ed25519 private key is never shown.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SecretOut {
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

async fn secret(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Extension(caller): Extension<Caller>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<Json<SecretOut>, ApiError> {
    if caller.read_only {
        return Err(ApiError::Forbidden);
    }
    let ep = find(&state, &principal, &app_id, &endpoint_id).await?;
    let keys = open_keys(&state, &ep)?;
    tracing::info!(target: "hookd::audit", action = "secret.read", token_id = %caller.token_id, app_id = %ep.app_id, endpoint_id = %ep.id);
    Ok(Json(SecretOut::from(&keys)))
}

/// Svix's `EndpointSecretRotateIn`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RotateIn {
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
    fn plan(
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

/// Makes new keys current; the old ones keep signing beside them for the overlap. Answers with
/// the new secret (as the Svix SDKs read it), or the new public key for a `v1a`-only endpoint.
async fn rotate_secret(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Extension(caller): Extension<Caller>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<RotateIn>,
) -> Result<Json<SecretOut>, ApiError> {
    let ep = find(&state, &principal, &app_id, &endpoint_id).await?;
    let schemes = open_keys(&state, &ep)?.schemes();
    let (new_keys, overlap) = input.plan(&schemes, state.config().rotation_overlap)?;
    let now = state.clock().now();
    let keys = change_keys(&state, &ep, |keys| {
        for key in &new_keys {
            keys.rotate(key, now, overlap);
        }
        Ok(())
    })
    .await?;
    tracing::info!(target: "hookd::audit", action = "secret.rotate", token_id = %caller.token_id, app_id = %ep.app_id, endpoint_id = %ep.id, overlap_secs = overlap.as_secs());
    Ok(Json(SecretOut::from(&keys)))
}

#[derive(Serialize)]
struct HeadersOut {
    headers: BTreeMap<String, String>,
    sensitive: Vec<String>,
}

#[derive(Deserialize)]
struct HeadersIn {
    headers: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct HeadersPatch {
    headers: BTreeMap<String, Option<String>>,
}

async fn headers(
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

async fn replace_headers(
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
async fn patch_headers(
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
            channels: Some(vec!["project_1".into()]),
            throttle_rate: Some(5),
            rate_limit: Some(5),
            timeout_seconds: Some(10),
            max_concurrency: Some(8),
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
