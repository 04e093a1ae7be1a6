//! `/api/v1/event-type`: the catalog of event types producers publish and customers subscribe
//! to. Deleting archives (as Svix does); `?expunge=true` deletes for good.
//!
//! Schema versions only add: a change whose versions remove, rename or retype a field of the
//! version before (or of the version it replaces) is refused with 422 naming the version and
//! the field, since receivers written against the older version would break
//! ([`hookd_core::schema::additive`]); `?allow_breaking=true` makes it anyway, for an operator
//! who knows no receiver reads the field.

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
        .route(v1!("/event-type"), get(list).post(create))
        .route(
            v1!("/event-type/{event_type_name}"),
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
    /// hookd addition: its messages go out in the Standard Webhooks envelope.
    envelope: Option<bool>,
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
    /// Left as it is by a PUT that does not give it (Svix's SDKs never do).
    envelope: Option<bool>,
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
    envelope: Option<bool>,
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
    /// hookd addition, shown only when on: Svix's clients see the shape they know.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    envelope: bool,
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
            envelope: et.envelope,
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

    /// The event type it describes, replacing `stored` if there is one: its creation time,
    /// and its envelope setting unless this gives one, stay.
    fn into_event_type(
        self,
        name: String,
        stored: Option<&EventType>,
        state: &ApiState,
    ) -> EventType {
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
            envelope: self
                .envelope
                .unwrap_or(stored.is_some_and(|stored| stored.envelope)),
            created_at: stored.map_or(now, |stored| stored.created_at),
            updated_at: now,
        }
    }
}

/// Holds the versions of `new` to the add-only rule against `stored` (what the catalog holds
/// now), unless the caller asks for a breaking change (`?allow_breaking=true`).
pub(crate) fn only_adds(
    query: &QueryParams,
    stored: Option<&serde_json::Value>,
    new: Option<&serde_json::Value>,
) -> Result<(), ApiError> {
    let Some(new) = new else { return Ok(()) };
    if query.flag("allow_breaking", false)? {
        return Ok(());
    }
    match hookd_core::schema::additive::breaking_change(stored, new) {
        None => Ok(()),
        Some(why) => Err(ApiError::body_field(
            "schemas",
            format!(
                "{why}: receivers of the older version would break; publish the change as a \
                 new event type (such as `.v2`) beside this one, or pass \
                 `?allow_breaking=true` to make it anyway"
            ),
        )),
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
    query: QueryParams,
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
        envelope,
    } = input;
    let update = EventTypeUpdate {
        description,
        archived,
        deprecated,
        schemas,
        feature_flag,
        group_name,
        feature_flags,
        envelope,
    };
    update.validate()?;
    only_adds(&query, None, update.schemas.as_ref())?;
    let et = update.into_event_type(name, None, &state);
    state.store().create_event_type(&et).await?;
    state.forget_event_types();
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
    query: QueryParams,
    JsonBody(input): JsonBody<EventTypeUpdate>,
) -> Result<Response, ApiError> {
    input.validate()?;
    let stored = state.store().get_event_type(&name).await?;
    let stored_schemas = stored.as_ref().and_then(|et| et.schemas.as_ref());
    only_adds(&query, stored_schemas, input.schemas.as_ref())?;
    let answer = match stored {
        Some(existing) => {
            let et = input.into_event_type(name, Some(&existing), &state);
            state.store().update_event_type(&et).await?;
            Json(EventTypeOut::new(et, true)).into_response()
        }
        None => {
            validate::name("name", &name)?;
            let et = input.into_event_type(name, None, &state);
            state.store().create_event_type(&et).await?;
            (StatusCode::CREATED, Json(EventTypeOut::new(et, true))).into_response()
        }
    };
    state.forget_event_types();
    Ok(answer)
}

async fn patch(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    query: QueryParams,
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
        only_adds(&query, et.schemas.as_ref(), value.as_ref())?;
        et.schemas = value;
    }
    if let Some(envelope) = input.envelope {
        et.envelope = envelope;
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
    state.forget_event_types();
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
    state.forget_event_types();
    Ok(StatusCode::NO_CONTENT)
}
