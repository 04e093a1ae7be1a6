//! `/api/v1/event-type`: the catalog of event types producers publish and customers subscribe
//! to. Deleting archives (as Svix does); `?expunge=true` deletes for good.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use hookd_core::model::EventType;
use serde::{Deserialize, Serialize};

use crate::extract::{JsonBody, QueryParams, patch_field};
use crate::list::{ListOut, page_request};
use crate::{ApiError, ApiState, validate};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route("/event-type", get(list).post(create))
        .route(
            "/event-type/{event_type_name}",
            get(fetch).put(upsert).patch(patch).delete(remove),
        )
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventTypeIn {
    name: String,
    description: String,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    deprecated: bool,
    schemas: Option<serde_json::Value>,
    feature_flag: Option<String>,
    group_name: Option<String>,
    feature_flags: Option<Vec<String>>,
}

/// Body of PUT: the name comes from the path.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventTypeUpdate {
    description: String,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    deprecated: bool,
    schemas: Option<serde_json::Value>,
    feature_flag: Option<String>,
    group_name: Option<String>,
    feature_flags: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventTypePatch {
    description: Option<String>,
    archived: Option<bool>,
    deprecated: Option<bool>,
    #[serde(default, deserialize_with = "patch_field")]
    schemas: Option<Option<serde_json::Value>>,
    #[serde(default, deserialize_with = "patch_field")]
    feature_flag: Option<Option<String>>,
    #[serde(default, deserialize_with = "patch_field")]
    group_name: Option<Option<String>>,
    #[serde(default, deserialize_with = "patch_field")]
    feature_flags: Option<Option<Vec<String>>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventTypeOut {
    name: String,
    description: String,
    archived: bool,
    deprecated: bool,
    schemas: Option<serde_json::Value>,
    /// hookd addition, with the content: an example payload of the newest schema (its own
    /// example, or one made from it).
    #[serde(skip_serializing_if = "Option::is_none")]
    example: Option<serde_json::Value>,
    feature_flag: Option<String>,
    group_name: Option<String>,
    feature_flags: Option<Vec<String>>,
    created_at: String,
    updated_at: String,
}

impl EventTypeOut {
    fn new(et: EventType, with_content: bool) -> Self {
        let example = with_content
            .then(|| et.schemas.as_ref().and_then(hookd_core::schema::newest))
            .flatten()
            .map(hookd_core::schema::example);
        Self {
            name: et.name,
            description: et.description,
            archived: et.archived,
            deprecated: et.deprecated,
            schemas: if with_content { et.schemas } else { None },
            example,
            feature_flag: et.feature_flag,
            group_name: et.group_name,
            feature_flags: et.feature_flags,
            created_at: et.created_at.to_rfc3339(),
            updated_at: et.updated_at.to_rfc3339(),
        }
    }
}

impl EventTypeUpdate {
    fn validate(&self) -> Result<(), ApiError> {
        validate::documentation("description", &self.description, 4096)?;
        validate::uid("featureFlag", self.feature_flag.as_deref())?;
        validate::uid("groupName", self.group_name.as_deref())?;
        feature_flags(self.feature_flags.as_deref())?;
        schemas("schemas", self.schemas.as_ref())
    }

    fn into_event_type(self, name: String, state: &ApiState) -> EventType {
        let now = state.clock().now();
        EventType {
            name,
            description: self.description,
            schemas: self.schemas,
            archived: self.archived,
            deprecated: self.deprecated,
            feature_flag: self.feature_flag,
            group_name: self.group_name,
            feature_flags: self.feature_flags,
            created_at: now,
            updated_at: now,
        }
    }
}

/// Svix's `featureFlags`: each a name, as `featureFlag` is.
fn feature_flags(flags: Option<&[String]>) -> Result<(), ApiError> {
    flags
        .unwrap_or_default()
        .iter()
        .try_for_each(|flag| validate::uid("featureFlags", Some(flag)))
}

/// `schemas`, if given: every version a JSON Schema that compiles as a publish compiles it
/// (so a `pattern` the regex engine refuses, such as a backreference, is refused here).
fn schemas(field: &str, value: Option<&serde_json::Value>) -> Result<(), ApiError> {
    value.map_or(Ok(()), |schemas| {
        hookd_core::schema::check_schemas(schemas).map_err(|why| ApiError::body_field(field, why))
    })
}

async fn list(
    State(state): State<ApiState>,
    query: QueryParams,
) -> Result<Json<ListOut<EventTypeOut>>, ApiError> {
    let include_archived = query.flag("include_archived", false)?;
    let with_content = query.flag("with_content", true)?;
    let page = state
        .store()
        .list_event_types(&page_request(&query)?, include_archived)
        .await?;
    Ok(Json(ListOut::from_page(
        page,
        |e| e.name.clone(),
        |e| EventTypeOut::new(e, with_content),
    )))
}

async fn create(
    State(state): State<ApiState>,
    JsonBody(input): JsonBody<EventTypeIn>,
) -> Result<Response, ApiError> {
    validate::name("name", &input.name)?;
    let EventTypeIn {
        name,
        description,
        archived,
        deprecated,
        schemas,
        feature_flag,
        group_name,
        feature_flags,
    } = input;
    let update = EventTypeUpdate {
        description,
        archived,
        deprecated,
        schemas,
        feature_flag,
        group_name,
        feature_flags,
    };
    update.validate()?;
    let et = update.into_event_type(name, &state);
    state.store().create_event_type(&et).await?;
    Ok((StatusCode::CREATED, Json(EventTypeOut::new(et, true))).into_response())
}

async fn fetch(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Json<EventTypeOut>, ApiError> {
    let et = state
        .store()
        .get_event_type(&name)
        .await?
        .ok_or(ApiError::NotFound("event type"))?;
    Ok(Json(EventTypeOut::new(et, true)))
}

async fn upsert(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    JsonBody(input): JsonBody<EventTypeUpdate>,
) -> Result<Response, ApiError> {
    input.validate()?;
    match state.store().get_event_type(&name).await? {
        Some(existing) => {
            let mut et = input.into_event_type(name, &state);
            et.created_at = existing.created_at;
            state.store().update_event_type(&et).await?;
            Ok(Json(EventTypeOut::new(et, true)).into_response())
        }
        None => {
            validate::name("name", &name)?;
            let et = input.into_event_type(name, &state);
            state.store().create_event_type(&et).await?;
            Ok((StatusCode::CREATED, Json(EventTypeOut::new(et, true))).into_response())
        }
    }
}

async fn patch(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    JsonBody(input): JsonBody<EventTypePatch>,
) -> Result<Json<EventTypeOut>, ApiError> {
    let mut et = state
        .store()
        .get_event_type(&name)
        .await?
        .ok_or(ApiError::NotFound("event type"))?;
    if let Some(description) = input.description {
        validate::documentation("description", &description, 4096)?;
        et.description = description;
    }
    if let Some(archived) = input.archived {
        et.archived = archived;
    }
    if let Some(deprecated) = input.deprecated {
        et.deprecated = deprecated;
    }
    if let Some(value) = input.schemas {
        schemas("schemas", value.as_ref())?;
        et.schemas = value;
    }
    if let Some(flag) = input.feature_flag {
        validate::uid("featureFlag", flag.as_deref())?;
        et.feature_flag = flag;
    }
    if let Some(group) = input.group_name {
        validate::uid("groupName", group.as_deref())?;
        et.group_name = group;
    }
    if let Some(flags) = input.feature_flags {
        feature_flags(flags.as_deref())?;
        et.feature_flags = flags;
    }
    et.updated_at = state.clock().now();
    state.store().update_event_type(&et).await?;
    Ok(Json(EventTypeOut::new(et, true)))
}

async fn remove(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    query: QueryParams,
) -> Result<StatusCode, ApiError> {
    let mut et = state
        .store()
        .get_event_type(&name)
        .await?
        .ok_or(ApiError::NotFound("event type"))?;
    if query.flag("expunge", false)? {
        state.store().delete_event_type(&name).await?;
    } else {
        et.archived = true;
        et.updated_at = state.clock().now();
        state.store().update_event_type(&et).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}
