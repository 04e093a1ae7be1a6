//! `/api/v1/app/{app}/msg`: publishing events and reading them back.
//!
//! Publishing is the producer's critical path: the payload's bytes are taken exactly as the
//! producer sent them (never re-serialized: these are the bytes every receiver gets and every
//! signature covers), and the message with its delivery rows is written in one transaction
//! before 202 is answered. Nothing is sent inside the request; the engine is woken instead.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Extension, Json, Router};
use hookd_core::MessageId;
use hookd_core::model::Message;
use hookd_core::validate::MessageError;
use hookd_store::MessageFilter;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::extract::{JsonBody, QueryParams};
use crate::list::{ListOut, page_request};
use crate::{ApiError, ApiState, Principal};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route("/app/{app_id}/msg", get(list).post(create))
        .route("/app/{app_id}/msg/{msg_id}", get(fetch))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageIn {
    event_type: String,
    payload: Box<RawValue>,
    event_id: Option<String>,
    channels: Option<Vec<String>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageOut {
    id: String,
    event_type: String,
    event_id: Option<String>,
    channels: Option<Vec<String>>,
    payload: Box<RawValue>,
    timestamp: String,
}

impl MessageOut {
    /// The message as the API shows it; `with_content: false` (or an expunged payload) shows
    /// `{}` in place of the payload.
    pub fn new(message: Message, with_content: bool) -> Self {
        let payload = message
            .payload
            .filter(|_| with_content)
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .and_then(|text| RawValue::from_string(text).ok())
            .unwrap_or_else(empty_object);
        Self {
            id: message.id.to_string(),
            event_type: message.event_type,
            event_id: message.event_id,
            channels: message.channels,
            payload,
            timestamp: message.created_at.to_rfc3339(),
        }
    }
}

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).expect("{} is JSON")
}

impl MessageIn {
    async fn validate(&self, state: &ApiState) -> Result<(), ApiError> {
        hookd_core::validate::message(
            &self.event_type,
            self.event_id.as_deref(),
            self.channels.as_deref(),
            self.payload.get(),
            state.config().max_payload_bytes,
        )
        .map_err(|e| match e {
            MessageError::Field { field, reason } => ApiError::body_field(field, reason),
            too_large @ MessageError::TooLarge { .. } => {
                ApiError::PayloadTooLarge(too_large.to_string())
            }
        })?;
        if state.config().strict_event_types {
            let known = state.store().get_event_type(&self.event_type).await?;
            match known {
                Some(et) if !et.archived => {}
                Some(_) => {
                    return Err(ApiError::body_field(
                        "eventType",
                        "this event type is archived",
                    ));
                }
                None => {
                    return Err(ApiError::body_field(
                        "eventType",
                        "no event type of this name exists",
                    ));
                }
            }
        }
        Ok(())
    }
}

async fn create(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
    query: QueryParams,
    JsonBody(input): JsonBody<MessageIn>,
) -> Result<(StatusCode, Json<MessageOut>), ApiError> {
    let app = state.app(&principal, &app_id).await?;
    input.validate(&state).await?;
    let now = state.clock().now();
    let message = Message {
        id: MessageId::new(now),
        app_id: app.id,
        event_type: input.event_type,
        event_id: input.event_id,
        channels: input.channels,
        payload: Some(String::from(Box::<str>::from(input.payload)).into_bytes()),
        created_at: now,
    };
    let created = state.store().create_message(&message).await?;
    if created.deliveries > 0 {
        state.wake_engine();
    }
    let with_content = query.flag("with_content", true)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(MessageOut::new(created.message, with_content)),
    ))
}

async fn list(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
    query: QueryParams,
) -> Result<Json<ListOut<MessageOut>>, ApiError> {
    let app = state.app(&principal, &app_id).await?;
    let filter = MessageFilter {
        event_types: query.list("event_types"),
        channel: query.get("channel").map(str::to_owned),
        before: query.timestamp("before")?,
        after: query.timestamp("after")?,
        // hookd addition: messages with a delivery in this state (1 takes 3 too).
        status: query.delivery_status("status")?,
    };
    let with_content = query.flag("with_content", true)?;
    let page = state
        .store()
        .list_messages(&app.id, &filter, &page_request(&query)?)
        .await?;
    Ok(Json(ListOut::from_page(
        page,
        |m| m.id.to_string(),
        |m| MessageOut::new(m, with_content),
    )))
}

async fn fetch(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, msg_id)): Path<(String, String)>,
    query: QueryParams,
) -> Result<Json<MessageOut>, ApiError> {
    let message = find(&state, &principal, &app_id, &msg_id).await?;
    Ok(Json(MessageOut::new(
        message,
        query.flag("with_content", true)?,
    )))
}

/// The message of an application visible to `principal`, by id or `eventId`.
pub(crate) async fn find(
    state: &ApiState,
    principal: &Principal,
    app_id: &str,
    msg_id: &str,
) -> Result<Message, ApiError> {
    let app = state.app(principal, app_id).await?;
    state
        .store()
        .get_message(&app.id, msg_id)
        .await?
        .ok_or(ApiError::NotFound("message"))
}
