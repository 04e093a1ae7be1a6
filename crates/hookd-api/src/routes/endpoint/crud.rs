//! Listing, creating, reading, replacing (PUT), patching and deleting endpoints.
//!
//! Every change tells the operator in the change's own transaction (see
//! [`crate::operations`]): `endpoint.created`, `endpoint.updated` (and `endpoint.disabled` or
//! `endpoint.enabled` when it toggles the endpoint), `endpoint.deleted`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use hookd_core::destination::Destination;
use hookd_core::model::Endpoint;
use hookd_core::operations::OperationalEvent;
use hookd_core::{AppId, EndpointId};
use hookd_store::{EndpointUpdate, KeySwap};
use hookd_vault::EndpointKeys;

use super::find_http;
use super::headers::place;
use super::models::{
    EndpointIn, EndpointOut, EndpointPatch, SealedChange, schemes_field, set_disabled,
};
use super::secret::{KEY_TRIES, changed, keys_kept_changing, open_keys, stored_keys};
use crate::extract::{JsonBody, QueryParams};
use crate::list::{ListOut, page_request};
use crate::operations::{Operator, toggled, told, wake_for};
use crate::{ApiError, ApiState, Principal, validate};

/// Stores a new endpoint, telling the operator, unless its application has as many as it may.
pub(crate) async fn insert(state: &ApiState, ep: &Endpoint, field: &str) -> Result<(), ApiError> {
    check_room(state, &ep.app_id, field).await?;
    let events = told(state, ep, OperationalEvent::EndpointCreated).await?;
    state
        .store()
        .create_endpoint_with_events(ep, &events)
        .await?;
    wake_for(state, &events);
    Ok(())
}

/// Refuses a new endpoint once `app` has `--max-endpoints-per-app` (destinations included):
/// a message goes to every endpoint that takes it, so the limit bounds what one publish costs
/// and how far a customer can fan the provider's messages out. Counted before the insert, so
/// requests racing at the limit may each add one. The refusal names the body's `field`.
async fn check_room(state: &ApiState, app: &AppId, field: &str) -> Result<(), ApiError> {
    let max = state.config().max_endpoints_per_app;
    if state.store().count_endpoints(app).await? >= max {
        return Err(ApiError::body_field(
            field,
            format!(
                "this application has {max} endpoints and destinations, the most this server \
                 allows (--max-endpoints-per-app); delete one or change an existing one"
            ),
        ));
    }
    Ok(())
}

/// Stores a changed endpoint, stamping the change and telling the operator (`endpoint.updated`
/// always; `endpoint.disabled` or `endpoint.enabled` too if the store finds the change disabled
/// or enabled it); with a `sealed` change (schemes, credential headers), also changes its
/// sealed keys, in the same transaction. `ep` was built from a read in which the endpoint's
/// `disabled` was `disabled_as_read`: if hookd changed that since, and the change does not ask
/// for a state itself, it is a 409 (see [`EndpointUpdate::disabled_as_read`]). Answers the
/// endpoint as stored, with its keys opened.
pub(crate) async fn save(
    state: &ApiState,
    mut ep: Endpoint,
    disabled_as_read: bool,
    sealed: SealedChange,
) -> Result<(Endpoint, EndpointKeys), ApiError> {
    ep.updated_at = state.clock().now();
    let (events, on_toggle) = match Operator::of(state, &ep).await? {
        Some(operator) => (
            vec![operator.tell(OperationalEvent::EndpointUpdated)],
            vec![operator.tell(toggled(&ep))],
        ),
        None => (Vec::new(), Vec::new()),
    };
    let update = EndpointUpdate {
        endpoint: &ep,
        disabled_as_read: Some(disabled_as_read),
        events: &events,
        on_toggle: &on_toggle,
        keys: None,
    };
    let keys = if sealed.is_empty() {
        state.store().update_endpoint_with(&update).await?;
        open_keys(state, &ep)?
    } else {
        save_with_keys(state, &update, &sealed).await?
    };
    wake_for(state, &events);
    Ok((ep, keys))
}

/// Writes `update` with the endpoint's keys changed by `change`, if nobody changed the keys
/// meanwhile (then again on what they changed them to).
async fn save_with_keys(
    state: &ApiState,
    update: &EndpointUpdate<'_>,
    change: &SealedChange,
) -> Result<EndpointKeys, ApiError> {
    let ep = update.endpoint;
    let mut sealed = ep.keys.clone();
    for _ in 0..KEY_TRIES {
        let (keys, new) = changed(state, ep, &sealed, |keys| change.apply(keys))?;
        let swap = KeySwap {
            old: &sealed,
            new: &new,
        };
        let written = EndpointUpdate {
            keys: Some(swap),
            ..*update
        };
        if state.store().update_endpoint_with(&written).await? {
            return Ok(keys);
        }
        sealed = stored_keys(state, ep).await?;
    }
    Err(keys_kept_changing())
}

pub(crate) async fn list(
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
    let list = ListOut::of_endpoints(page, |ep| shown(&state, ep))?;
    Ok(Json(list))
}

pub(crate) async fn create(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
    JsonBody(input): JsonBody<EndpointIn>,
) -> Result<Response, ApiError> {
    let app = state.app(&principal, &app_id).await?;
    input.validate(&state)?;
    let ep = input.into_new(&app, &state)?;
    insert(&state, &ep, "url").await?;
    Ok((StatusCode::CREATED, Json(shown(&state, ep)?)).into_response())
}

/// The endpoint as the endpoint routes show it, with its schemes and public key.
fn shown(state: &ApiState, ep: Endpoint) -> Result<EndpointOut, ApiError> {
    let keys = open_keys(state, &ep)?;
    Ok(EndpointOut::with_keys(ep, &keys))
}

pub(crate) async fn fetch(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<Json<EndpointOut>, ApiError> {
    let ep = find_http(&state, &principal, &app_id, &endpoint_id).await?;
    Ok(Json(shown(&state, ep)?))
}

/// PUT replaces the endpoint, or creates it (with the path as its uid) when missing.
pub(crate) async fn upsert(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<EndpointIn>,
) -> Result<Response, ApiError> {
    let app = state.app(&principal, &app_id).await?;
    input.validate(&state)?;
    match state.store().get_endpoint(&app.id, &endpoint_id).await? {
        Some(ep) if ep.destination != Destination::Http => Err(ApiError::Conflict(format!(
            "{endpoint_id} is a destination of this application; change it through its \
             destination routes"
        ))),
        Some(mut ep) => {
            let (read, schemes) = (ep.disabled, input.signature_schemes.clone());
            let headers = input.apply_to(&mut ep, state.clock().now())?;
            let sealed = SealedChange {
                schemes,
                headers: headers.map(|all| place(&state, &mut ep, all)),
                destination: None,
            };
            let (ep, keys) = save(&state, ep, read, sealed).await?;
            Ok(Json(EndpointOut::with_keys(ep, &keys)).into_response())
        }
        None if EndpointId::looks_like(&endpoint_id) => Err(ApiError::NotFound("endpoint")),
        None => {
            validate::name("uid", &endpoint_id)?;
            let mut ep = input.into_new(&app, &state)?;
            ep.uid = Some(endpoint_id);
            insert(&state, &ep, "url").await?;
            Ok((StatusCode::CREATED, Json(shown(&state, ep)?)).into_response())
        }
    }
}

pub(super) async fn patch(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<EndpointPatch>,
) -> Result<Json<EndpointOut>, ApiError> {
    let mut ep = find_http(&state, &principal, &app_id, &endpoint_id).await?;
    let read = ep.disabled;
    if let Some(url) = input.url {
        validate::endpoint_url("url", &url, state.config().allow_http_endpoints)?;
        ep.url = url;
    }
    if let Some(description) = input.description {
        validate::line("description", &description, super::models::DESCRIPTION_MAX)?;
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
    if let Some(ordering) = &input.ordering {
        ep.ordering = validate::ordering(ordering)?;
    }
    if let Some(schemes) = &input.signature_schemes {
        schemes_field(schemes)?;
    }
    let sealed = SealedChange {
        schemes: input.signature_schemes,
        ..SealedChange::default()
    };
    let (ep, keys) = save(&state, ep, read, sealed).await?;
    Ok(Json(EndpointOut::with_keys(ep, &keys)))
}

pub(crate) async fn remove(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let ep = find_http(&state, &principal, &app_id, &endpoint_id).await?;
    delete(&state, &ep).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes `ep` with its deliveries and attempts, telling the operator (`endpoint.deleted`).
pub(crate) async fn delete(state: &ApiState, ep: &Endpoint) -> Result<(), ApiError> {
    let events = told(state, ep, OperationalEvent::EndpointDeleted).await?;
    state
        .store()
        .delete_endpoint_with_events(ep, &events)
        .await?;
    wake_for(state, &events);
    Ok(())
}
