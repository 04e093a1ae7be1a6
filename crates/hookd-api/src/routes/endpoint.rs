//! `/api/v1/app/{app}/endpoint`: the URLs of an application that receive its messages, with
//! their filters, signing secret and custom headers.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use hookd_core::model::{Application, Endpoint, Metadata};
use hookd_core::{EndpointId, Timestamp};
use serde::{Deserialize, Serialize};
use webhook_signature::Secret;

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
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndpointPatch {
    url: Option<String>,
    description: Option<String>,
    #[serde(default, deserialize_with = "patch_field")]
    uid: Option<Option<String>>,
    disabled: Option<bool>,
    #[serde(default, deserialize_with = "patch_field")]
    event_types: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "patch_field")]
    channels: Option<Option<Vec<String>>>,
    metadata: Option<Metadata>,
    #[serde(default, alias = "rateLimit", deserialize_with = "patch_field")]
    throttle_rate: Option<Option<u16>>,
    #[serde(default, deserialize_with = "patch_field")]
    timeout_seconds: Option<Option<u16>>,
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
    metadata: Metadata,
    created_at: String,
    updated_at: String,
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
            metadata: ep.metadata,
            created_at: ep.created_at.to_rfc3339(),
            updated_at: ep.updated_at.to_rfc3339(),
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
        Ok(())
    }

    /// The endpoint's secret: the caller's, if valid, or a new random one.
    fn secret(&self) -> Result<String, ApiError> {
        match &self.secret {
            None => Ok(Secret::generate().to_string()),
            Some(text) => Secret::parse_endpoint(text)
                .map(|s| s.to_string())
                .map_err(|e| ApiError::body_field("secret", e.to_string())),
        }
    }

    fn into_new(self, app: &Application, state: &ApiState) -> Result<Endpoint, ApiError> {
        let now = state.clock().now();
        let secret = self.secret()?;
        let mut ep = Endpoint {
            id: EndpointId::new(now),
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
            metadata: self.metadata,
            headers: self.headers.unwrap_or_default(),
            secret,
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
        if let Some(headers) = self.headers {
            ep.headers = headers;
        }
    }
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

/// Stores a changed endpoint, stamping the change.
async fn save(state: &ApiState, mut ep: Endpoint) -> Result<EndpointOut, ApiError> {
    ep.updated_at = state.clock().now();
    state.store().update_endpoint(&ep).await?;
    Ok(ep.into())
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
    Ok(Json(ListOut::from_page(
        page,
        |e| e.id.to_string(),
        EndpointOut::from,
    )))
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
    state.store().create_endpoint(&ep).await?;
    Ok((StatusCode::CREATED, Json(EndpointOut::from(ep))).into_response())
}

async fn fetch(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<Json<EndpointOut>, ApiError> {
    Ok(Json(
        find(&state, &principal, &app_id, &endpoint_id)
            .await?
            .into(),
    ))
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
            input.apply_to(&mut ep, state.clock().now());
            Ok(Json(save(&state, ep).await?).into_response())
        }
        None if EndpointId::looks_like(&endpoint_id) => Err(ApiError::NotFound("endpoint")),
        None => {
            validate::name("uid", &endpoint_id)?;
            let mut ep = input.into_new(&app, &state)?;
            ep.uid = Some(endpoint_id);
            state.store().create_endpoint(&ep).await?;
            Ok((StatusCode::CREATED, Json(EndpointOut::from(ep))).into_response())
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
    Ok(Json(save(&state, ep).await?))
}

async fn remove(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let ep = find(&state, &principal, &app_id, &endpoint_id).await?;
    state.store().delete_endpoint(&ep).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize)]
struct SecretOut {
    key: String,
}

async fn secret(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<Json<SecretOut>, ApiError> {
    let ep = find(&state, &principal, &app_id, &endpoint_id).await?;
    Ok(Json(SecretOut { key: ep.secret }))
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
    save(&state, ep).await?;
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
    save(&state, ep).await?;
    Ok(StatusCode::NO_CONTENT)
}
