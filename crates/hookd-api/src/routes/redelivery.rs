//! Sending again, giving up, and sending a test: resend one message to one endpoint (same
//! `webhook-id`), skip one (give up on it, so the next of its ordering key goes), recover an
//! endpoint's failed messages since a time, and send an example event to one endpoint. They
//! only change the queue; the engine sends through the same path as every other delivery.
//!
//! A test send is marked as one inside its signed body: `"test": true` at the top level of
//! the JSON object delivered (beside `type`, `timestamp` and `data` where the envelope is on,
//! else in the example's own object), so a receiver that verified the signature knows no one
//! added or removed the mark on the way, which a header would not tell it.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Extension, Json, Router};
use hookd_core::Timestamp;
use hookd_core::envelope::{Envelope, TEST_MARK};
use hookd_core::model::Message;
use hookd_core::{MessageId, TaskId};
use hookd_store::{NewMessage, Route, Skipped};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::extract::JsonBody;
use crate::routes::message::MessageOut;
use crate::routes::{endpoint, message};
use crate::validate;
use crate::{ApiError, ApiState, Principal};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(
            v1!("/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/resend"),
            post(resend),
        )
        .route(
            v1!("/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/skip"),
            post(skip),
        )
        .route(
            v1!("/app/{app_id}/endpoint/{endpoint_id}/recover"),
            post(recover),
        )
        .route(
            v1!("/app/{app_id}/endpoint/{endpoint_id}/send-example"),
            post(send_example),
        )
}

/// Answers 202 with `{}`: the official SDKs parse the body of this reply.
async fn resend(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, msg_id, endpoint_id)): Path<(String, String, String)>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let msg = message::find(&state, &principal, &app_id, &msg_id).await?;
    if msg.payload.is_none() {
        return Err(ApiError::BadRequest(
            "this message's payload was expunged or is past its retention: it cannot be resent"
                .into(),
        ));
    }
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    if state
        .store()
        .resend(&msg.id, &ep.id, state.clock().now())
        .await?
    {
        state.wake_engine();
    }
    Ok((StatusCode::ACCEPTED, Json(json!({}))))
}

/// hookd addition: gives up on a pending delivery (marked failed without an attempt), so the
/// next message of its ordering key goes. 204; 409 while an attempt is in flight or once it
/// has settled.
async fn skip(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, msg_id, endpoint_id)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let msg = message::find(&state, &principal, &app_id, &msg_id).await?;
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    let now = state.clock().now();
    match state.store().skip(&msg.id, &ep.id, now).await? {
        Skipped::Skipped => {
            state.wake_engine();
            Ok(StatusCode::NO_CONTENT)
        }
        Skipped::InFlight => Err(ApiError::Conflict(
            "an attempt of this message to this endpoint is in flight; skip it once it ends".into(),
        )),
        Skipped::Settled => Err(ApiError::Conflict(
            "this message's delivery to this endpoint has settled already".into(),
        )),
    }
}

#[derive(Deserialize)]
struct RecoverIn {
    since: String,
    until: Option<String>,
}

/// Svix answers recover with a background task; hookd's finishes before it answers.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RecoverOut {
    id: String,
    status: &'static str,
    task: &'static str,
    updated_at: String,
    /// hookd addition: how many failed deliveries were queued again.
    recovered: u64,
}

async fn recover(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<RecoverIn>,
) -> Result<(StatusCode, Json<RecoverOut>), ApiError> {
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    let (since, until) = validate::time_range(&input.since, input.until.as_deref())?;
    let now = state.clock().now();
    let recovered = state.store().recover(&ep.id, since, until, now).await?;
    if recovered > 0 {
        state.wake_engine();
    }
    let out = RecoverOut {
        id: TaskId::new(now).to_string(),
        status: "finished",
        task: "endpoint.recover",
        updated_at: now.to_rfc3339(),
        recovered,
    };
    Ok((StatusCode::ACCEPTED, Json(out)))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventExampleIn {
    event_type: String,
    #[serde(default)]
    example_index: usize,
    /// Sent instead of the catalog's example when given.
    payload: Option<Value>,
}

/// The example payload for `event_type`: the catalog's (`schemas["1"].examples[index]`) when
/// it has one, otherwise one made from its newest schema, otherwise a small placeholder naming
/// the type; the caller's `payload` wins.
async fn example_payload(state: &ApiState, input: &EventExampleIn) -> Result<Value, ApiError> {
    match &input.payload {
        Some(payload) if payload.is_object() => return Ok(payload.clone()),
        Some(_) => return Err(ApiError::body_field("payload", "must be a JSON object")),
        None => {}
    }
    let event_type = state.store().get_event_type(&input.event_type).await?;
    let schemas = event_type.and_then(|et| et.schemas);
    let examples = schemas
        .as_ref()
        .and_then(|schemas| schemas.get("1")?.get("examples")?.as_array().cloned())
        .unwrap_or_default();
    match examples.get(input.example_index) {
        Some(example) if example.is_object() => Ok(example.clone()),
        Some(_) => Err(ApiError::body_field(
            "exampleIndex",
            "this example is not a JSON object",
        )),
        None if input.example_index > 0 => Err(ApiError::body_field(
            "exampleIndex",
            "no example at this index",
        )),
        None => match schemas.as_ref().and_then(hookd_core::schema::newest) {
            Some(schema) => Ok(hookd_core::schema::example(schema)),
            None => Ok(json!({ "type": input.event_type, "data": { "example": true } })),
        },
    }
}

/// The body a test send of `payload` (a JSON object) delivers, marked as a test: inside the
/// envelope where `enveloped`, else the object itself with the mark added. An object that
/// has a member of the mark's name already is refused: the mark would change its meaning.
fn marked_as_test(
    input: &EventExampleIn,
    mut payload: Value,
    enveloped: bool,
    now: Timestamp,
) -> Result<Vec<u8>, ApiError> {
    if enveloped {
        let envelope = Envelope {
            event_type: &input.event_type,
            occurred_at: now,
            test: true,
        };
        return Ok(envelope.around(&payload.to_string()));
    }
    let object = payload.as_object_mut().expect("examples are JSON objects");
    if object.contains_key(TEST_MARK) {
        let field = if input.payload.is_some() {
            "payload"
        } else {
            "exampleIndex"
        };
        return Err(ApiError::body_field(
            field,
            format!(
                "this example has a top-level `{TEST_MARK}` member, the one that marks test \
                 sends; send one without it, or turn the envelope on, where the mark sits \
                 beside the example"
            ),
        ));
    }
    object.insert(TEST_MARK.to_owned(), Value::Bool(true));
    Ok(serde_json::to_vec(&payload).expect("JSON values serialize"))
}

async fn send_example(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<EventExampleIn>,
) -> Result<Json<MessageOut>, ApiError> {
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    validate::name("eventType", &input.event_type)?;
    let payload = example_payload(&state, &input).await?;
    let now = state.clock().now();
    let app = state.app(&principal, &app_id).await?;
    let enveloped =
        app.envelope || message::event_type_envelopes(&state, &input.event_type).await?;
    let body = marked_as_test(&input, payload, enveloped, now)?;
    let message = Message {
        id: MessageId::new(now),
        app_id: ep.app_id.clone(),
        event_type: input.event_type,
        event_id: None,
        channels: None,
        ordering_key: None,
        tags: None,
        deliver_at: None,
        payload: Some(body),
        created_at: now,
    };
    let created = state
        .store()
        .publish(NewMessage::new(message).routed(Route::Only(ep.id)))
        .await?;
    if created.queued > 0 {
        state.wake_engine();
    }
    Ok(Json(MessageOut::new(created.message, true)))
}
