//! `/api/v1/app`: the applications (customers) messages are sent to.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use hookd_core::AppId;
use hookd_core::model::{Application, Metadata};
use hookd_store::StoreError;
use hookd_store::store::ingest::{INTERNAL_APP_PREFIX, is_internal_app_uid};
use serde::{Deserialize, Serialize};

use crate::extract::{JsonBody, QueryParams, metadata, metadata_patch, patch_field};
use crate::list::{ListOut, page_request};
use crate::{ApiError, ApiState, Principal, validate};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(v1!("/app"), get(list).post(create))
        .route(
            v1!("/app/{app_id}"),
            get(fetch).put(upsert).patch(patch).delete(remove),
        )
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApplicationIn {
    name: String,
    uid: Option<String>,
    #[serde(default, deserialize_with = "metadata")]
    metadata: Metadata,
    throttle_rate: Option<u16>,
    /// hookd addition: its messages go out in the Standard Webhooks envelope. Left as it is
    /// by a PUT that does not give it (Svix's SDKs never do).
    envelope: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApplicationPatch {
    name: Option<String>,
    #[serde(default, deserialize_with = "patch_field")]
    uid: Option<Option<String>>,
    #[serde(default, deserialize_with = "metadata_patch")]
    metadata: Option<Metadata>,
    #[serde(default, deserialize_with = "patch_field")]
    throttle_rate: Option<Option<u16>>,
    envelope: Option<bool>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationOut {
    id: String,
    uid: Option<String>,
    name: String,
    metadata: Metadata,
    throttle_rate: Option<u16>,
    /// hookd addition, shown only when on: Svix's clients see the shape they know.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    envelope: bool,
    created_at: String,
    updated_at: String,
}

impl From<Application> for ApplicationOut {
    fn from(app: Application) -> Self {
        Self {
            id: app.id.to_string(),
            uid: app.uid,
            name: app.name,
            metadata: app.metadata,
            throttle_rate: app.throttle_rate,
            envelope: app.envelope,
            created_at: app.created_at.to_rfc3339(),
            updated_at: app.updated_at.to_rfc3339(),
        }
    }
}

impl ApplicationIn {
    pub(crate) fn validate(&self) -> Result<(), ApiError> {
        validate::text("name", &self.name, 256)?;
        validate::uid("uid", self.uid.as_deref())?;
        free_uid("uid", self.uid.as_deref())?;
        validate::throttle_rate("throttleRate", self.throttle_rate)
    }

    pub(crate) fn into_new(self, state: &ApiState) -> Application {
        let now = state.clock().now();
        Application {
            id: AppId::new(now),
            uid: self.uid,
            name: self.name,
            metadata: self.metadata,
            throttle_rate: self.throttle_rate,
            envelope: self.envelope.unwrap_or(false),
            created_at: now,
            updated_at: now,
        }
    }

    fn apply_to(self, app: &mut Application) {
        app.name = self.name;
        app.uid = self.uid;
        app.metadata = self.metadata;
        app.throttle_rate = self.throttle_rate;
        if let Some(envelope) = self.envelope {
            app.envelope = envelope;
        }
    }
}

fn ok(app: Application, status: StatusCode) -> Response {
    (status, Json(ApplicationOut::from(app))).into_response()
}

async fn list(
    State(state): State<ApiState>,
    query: QueryParams,
) -> Result<Json<ListOut<ApplicationOut>>, ApiError> {
    let page = state.store().list_apps(&page_request(&query)?).await?;
    Ok(Json(ListOut::from_page(
        page,
        |a| a.id.to_string(),
        ApplicationOut::from,
    )))
}

async fn create(
    State(state): State<ApiState>,
    query: QueryParams,
    JsonBody(input): JsonBody<ApplicationIn>,
) -> Result<Response, ApiError> {
    input.validate()?;
    if query.flag("get_if_exists", false)?
        && let Some(uid) = &input.uid
        && let Some(existing) = state.store().get_app(uid).await?
    {
        return Ok(ok(existing, StatusCode::OK));
    }
    let app = input.into_new(&state);
    state.store().create_app(&app).await?;
    Ok(ok(app, StatusCode::CREATED))
}

async fn fetch(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
) -> Result<Json<ApplicationOut>, ApiError> {
    Ok(Json(state.app(&principal, &app_id).await?.into()))
}

/// PUT replaces the application, or creates it (with the path as its uid) when missing.
async fn upsert(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
    JsonBody(input): JsonBody<ApplicationIn>,
) -> Result<Response, ApiError> {
    input.validate()?;
    match state.store().get_app(&app_id).await? {
        Some(mut app) => {
            changeable(&app)?;
            input.apply_to(&mut app);
            app.updated_at = state.clock().now();
            state.store().update_app(&app).await?;
            state.forget_apps();
            Ok(ok(app, StatusCode::OK))
        }
        None => {
            let app = create_at_path(&state, &principal, &app_id, input).await?;
            Ok(ok(app, StatusCode::CREATED))
        }
    }
}

/// Makes the application a path names that does not exist yet (an admin's PUT): see
/// [`new_at_path`]. Made meanwhile by a concurrent request, that one is answered.
async fn create_at_path(
    state: &ApiState,
    principal: &Principal,
    app_id: &str,
    input: ApplicationIn,
) -> Result<Application, ApiError> {
    let app = new_at_path(state, app_id, input)?;
    match state.store().create_app(&app).await {
        Err(StoreError::Conflict(_)) => state.app(principal, app_id).await,
        done => done.map(|()| app).map_err(ApiError::from),
    }
}

/// The application to make for a path that names none yet, with the path as its uid (an
/// admin's PUT, or a publish that carries the application, as Svix's SDKs send it, which the
/// store makes in the publish's transaction); the path wins over a uid in the body. Both are
/// the provider's alone ([`crate::permissions`]): a customer's token never makes an
/// application.
pub(crate) fn new_at_path(
    state: &ApiState,
    app_id: &str,
    input: ApplicationIn,
) -> Result<Application, ApiError> {
    if AppId::looks_like(app_id) {
        return Err(ApiError::NotFound("application"));
    }
    validate::name("uid", app_id)?;
    free_uid("uid", Some(app_id))?;
    let mut app = input.into_new(state);
    app.uid = Some(app_id.to_owned());
    Ok(app)
}

async fn patch(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
    JsonBody(input): JsonBody<ApplicationPatch>,
) -> Result<Json<ApplicationOut>, ApiError> {
    let mut app = state.app(&principal, &app_id).await?;
    changeable(&app)?;
    if let Some(name) = input.name {
        validate::text("name", &name, 256)?;
        app.name = name;
    }
    if let Some(uid) = input.uid {
        validate::uid("uid", uid.as_deref())?;
        free_uid("uid", uid.as_deref())?;
        app.uid = uid;
    }
    if let Some(metadata) = input.metadata {
        app.metadata = metadata;
    }
    if let Some(rate) = input.throttle_rate {
        app.throttle_rate = rate;
    }
    if let Some(envelope) = input.envelope {
        app.envelope = envelope;
    }
    app.updated_at = state.clock().now();
    state.store().update_app(&app).await?;
    state.forget_apps();
    Ok(Json(app.into()))
}

async fn remove(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let app = state.app(&principal, &app_id).await?;
    changeable(&app)?;
    state.store().delete_app(&app.id).await?;
    state.forget_apps();
    Ok(StatusCode::NO_CONTENT)
}

/// An ingest source's application (uid `hookd-ingest-…`) is named, changed and deleted through
/// its source only; its endpoints and messages are reachable here as any application's.
fn changeable(app: &Application) -> Result<(), ApiError> {
    match is_internal_app_uid(app.uid.as_deref()) {
        true => Err(ApiError::Conflict(format!(
            "application {} belongs to an ingest source; change or delete it through \
             /ingest/api/v1/source",
            app.id
        ))),
        false => Ok(()),
    }
}

/// Refuses a uid of the ingest sources' own applications for any other.
fn free_uid(field: &str, uid: Option<&str>) -> Result<(), ApiError> {
    match is_internal_app_uid(uid) {
        true => Err(ApiError::body_field(
            field,
            format!("uids starting with {INTERNAL_APP_PREFIX} are ingest sources' own"),
        )),
        false => Ok(()),
    }
}
