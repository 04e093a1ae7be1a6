//! `/ingest/api/v1/source`: listing, creating, reading, replacing (PUT, which creates with the
//! path as uid) and deleting sources; rotating a source's token; a portal link scoped to it.
//!
//! A source is written after the application it owns; when the source cannot be written (its
//! uid is taken) the application is deleted again. Deleting a source deletes its application,
//! which takes the source, its endpoints, messages and records with it in one write.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use hookd_core::SourceId;
use hookd_store::{IngestSource, Page};
use serde::Deserialize;

use super::models::{RotateTokenOut, Sealed, SourceIn, SourceOut, ingest_url, new_token};
use crate::auth::Caller;
use crate::extract::{JsonBody, QueryParams};
use crate::list::{ListOut, page_request};
use crate::routes::auth::{PortalAccessOut, portal_access, portal_expiry};
use crate::{ApiError, ApiState, Principal, token_hash, validate};
use hookd_ingest::SourceConfig;

/// The source `id_or_uid` names.
pub(super) async fn find(state: &ApiState, id_or_uid: &str) -> Result<IngestSource, ApiError> {
    state
        .store()
        .get_source(id_or_uid)
        .await?
        .ok_or(ApiError::NotFound("ingest source"))
}

/// The source `id_or_uid` names, if `principal` may see its application: to a customer's
/// token, another's source answers exactly as a missing one.
pub(super) async fn visible(
    state: &ApiState,
    principal: &Principal,
    id_or_uid: &str,
) -> Result<IngestSource, ApiError> {
    let source = find(state, id_or_uid).await?;
    principal
        .require_app(&source.app_id)
        .map_err(|_| ApiError::NotFound("ingest source"))?;
    Ok(source)
}

pub(super) async fn list(
    State(state): State<ApiState>,
    query: QueryParams,
) -> Result<Json<ListOut<SourceOut>>, ApiError> {
    let page = state.store().list_sources(&page_request(&query)?).await?;
    let items = page
        .items
        .into_iter()
        .map(|source| Ok((source.id.to_string(), SourceOut::of(&state, source)?)))
        .collect::<Result<Vec<_>, ApiError>>()?;
    let shown = Page {
        items,
        has_more: page.has_more,
    };
    Ok(Json(ListOut::from_page(
        shown,
        |(id, _)| id.clone(),
        |(_, out)| out,
    )))
}

pub(super) async fn create(
    State(state): State<ApiState>,
    JsonBody(input): JsonBody<SourceIn>,
) -> Result<Response, ApiError> {
    let scheme = input.validate(&state)?;
    let source = insert(&state, input, &scheme, None).await?;
    Ok((StatusCode::CREATED, Json(SourceOut::of(&state, source)?)).into_response())
}

/// Writes a new source from `input` (with `uid` in place of the body's, for a PUT that
/// creates) and the application it owns.
async fn insert(
    state: &ApiState,
    input: SourceIn,
    scheme: &SourceConfig,
    uid: Option<String>,
) -> Result<IngestSource, ApiError> {
    let (mut source, app) = input.into_new(state, scheme);
    if uid.is_some() {
        source.uid = uid;
    }
    state.store().create_app(&app).await?;
    if let Err(error) = state.store().create_source(&source).await {
        state.store().delete_app(&app.id).await?;
        return Err(error.into());
    }
    Ok(source)
}

pub(super) async fn fetch(
    State(state): State<ApiState>,
    Path(source_id): Path<String>,
) -> Result<Json<SourceOut>, ApiError> {
    let source = find(&state, &source_id).await?;
    Ok(Json(SourceOut::of(&state, source)?))
}

/// PUT replaces the source (its token and application stay), or creates it with the path as
/// its uid when missing.
pub(super) async fn upsert(
    State(state): State<ApiState>,
    Path(source_id): Path<String>,
    JsonBody(input): JsonBody<SourceIn>,
) -> Result<Response, ApiError> {
    let scheme = input.validate(&state)?;
    match state.store().get_source(&source_id).await? {
        Some(mut source) => {
            input.apply_to(&state, &mut source, &scheme, state.clock().now())?;
            state.store().update_source(&source).await?;
            rename_app(&state, &source).await?;
            Ok(Json(SourceOut::of(&state, source)?).into_response())
        }
        None if SourceId::looks_like(&source_id) => Err(ApiError::NotFound("ingest source")),
        None => {
            validate::name("uid", &source_id)?;
            let source = insert(&state, input, &scheme, Some(source_id)).await?;
            Ok((StatusCode::CREATED, Json(SourceOut::of(&state, source)?)).into_response())
        }
    }
}

/// Gives the source's application the source's name, as the portal shows it.
async fn rename_app(state: &ApiState, source: &IngestSource) -> Result<(), ApiError> {
    let Some(mut app) = state.store().get_app(source.app_id.as_str()).await? else {
        return Ok(());
    };
    if app.name != source.name {
        app.name.clone_from(&source.name);
        app.updated_at = source.updated_at;
        state.store().update_app(&app).await?;
        state.forget_apps();
    }
    Ok(())
}

pub(super) async fn remove(
    State(state): State<ApiState>,
    Path(source_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let source = find(&state, &source_id).await?;
    state.store().delete_app(&source.app_id).await?;
    state.forget_apps();
    Ok(StatusCode::NO_CONTENT)
}

/// A new token, so a new URL; the old one keeps working for `--rotation-overlap` (24 hours by
/// default), time to change the URL at the provider.
pub(super) async fn rotate_token(
    State(state): State<ApiState>,
    Path(source_id): Path<String>,
) -> Result<Json<RotateTokenOut>, ApiError> {
    let mut source = find(&state, &source_id).await?;
    let sealed = Sealed::open(&state, &source)?;
    let now = state.clock().now();
    let token = new_token();
    source.previous_token_hash = Some(std::mem::replace(
        &mut source.token_hash,
        token_hash(&token),
    ));
    source.previous_until = Some(now.plus(state.config().rotation_overlap));
    source.sealed = Sealed {
        config: sealed.config,
        token: token.clone(),
    }
    .seal(&state, &source.id);
    source.updated_at = now;
    state.store().update_source(&source).await?;
    Ok(Json(RotateTokenOut {
        ingest_url: ingest_url(&state, &token),
    }))
}

/// Svix's `IngestSourceConsumerPortalAccessIn`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct DashboardIn {
    expiry: Option<u64>,
    read_only: Option<bool>,
}

/// A portal link for the source's application: its endpoints, what it accepted and forwarded.
pub(super) async fn dashboard(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(source_id): Path<String>,
    JsonBody(input): JsonBody<DashboardIn>,
) -> Result<Json<PortalAccessOut>, ApiError> {
    let expiry = portal_expiry(input.expiry)?;
    let source = find(&state, &source_id).await?;
    let read_only = input.read_only.unwrap_or(false);
    let access = portal_access(&state, &caller, source.app_id, expiry, read_only).await?;
    Ok(Json(access))
}
