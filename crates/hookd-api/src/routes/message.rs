//! `/api/v1/app/{app}/msg`: publishing events and reading them back.
//!
//! Publishing is the producer's critical path: the payload's bytes are taken exactly as the
//! producer sent them (never re-serialized: these are the bytes every receiver gets and every
//! signature covers), and the message with its delivery rows is written in one transaction
//! before 202 is answered. Nothing is sent inside the request; the engine is woken instead.
//!
//! Where the message's application or event type asks for the Standard Webhooks envelope
//! (`envelope: true`), the bytes stored are the producer's inside `{"type", "timestamp",
//! "data"}`, built here once ([`hookd_core::envelope`]); `timestamp` is the message's
//! `occurredAt` when the producer gives one (when the event happened), else the publish time.
//!
//! A message may carry its own `payloadRetentionPeriod` (days), which replaces the server's
//! retention window for it; `DELETE …/msg/{msg_id}/content` drops its payload at once.

use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::handler::Handler;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use hookd_core::envelope::Envelope;
use hookd_core::model::filters_take;
use hookd_core::model::{Application, Message};
use hookd_core::validate::MessageError;
use hookd_core::{MessageId, Timestamp};
use hookd_store::{Cursor, DeliveryTally, MessageFilter, NewMessage, PageRequest};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tracing::Instrument;

use crate::auth::{Caller, Publish};
use crate::extract::{JsonBody, QueryParams};
use crate::list::{ListOut, page_request};
use crate::routes::application::{self, ApplicationIn};
use crate::{ApiError, ApiState, Principal};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(v1!("/app/{app_id}/msg"), get(list).merge(post(publish)))
        .route(v1!("/app/{app_id}/msg/precheck/active"), post(precheck))
        .route(v1!("/app/{app_id}/msg/{msg_id}"), get(fetch))
        .route(v1!("/app/{app_id}/msg/{msg_id}/content"), delete(expunge))
}

/// [`create`], its answer marked: publishes, accepted or not, leave no audit line of their
/// own (see [`crate::auth`]). A wrapper, not a layer: a layer costs a boxed service cloned per
/// request.
async fn publish(State(state): State<ApiState>, request: Request) -> Response {
    let mut response = Handler::call(create, request, state).await;
    response.extensions_mut().insert(Publish);
    response
}

/// How far ahead a message may be scheduled (`deliverAt`): its content must outlive it, and
/// the server's window is 30 days by default.
const MAX_DELIVER_AHEAD_DAYS: u64 = 30;

/// The longest `payloadRetentionPeriod` accepted, in days (Svix caps it at 90; hookd's own
/// window may be longer, so a message may ask for up to ten years).
const MAX_RETENTION_DAYS: u64 = 3650;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageIn {
    event_type: String,
    payload: Box<RawValue>,
    event_id: Option<String>,
    channels: Option<Vec<String>>,
    /// Days this message's content is kept once delivered, instead of the server's window.
    payload_retention_period: Option<i64>,
    /// The same in hours (Svix's newer field; not both).
    payload_retention_hours: Option<i64>,
    /// Svix's inline application: made, with the path as its uid, when the path names none.
    application: Option<ApplicationIn>,
    /// Svix's scheduled delivery: the deliveries become due then, not at once (RFC 3339, in
    /// the future, at most [`MAX_DELIVER_AHEAD_DAYS`] ahead).
    deliver_at: Option<String>,
    /// Messages sharing this key reach each endpoint one at a time, in publish order.
    ordering_key: Option<String>,
    /// Svix's tags: labels the message list filters by (`tag=`).
    tags: Option<Vec<String>>,
    /// hookd addition: when the event happened (RFC 3339), the envelope's `timestamp` where
    /// the envelope is on; the publish time when not given.
    occurred_at: Option<String>,
}

#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageOut {
    id: String,
    event_type: String,
    event_id: Option<String>,
    channels: Option<Vec<String>>,
    /// hookd addition: the message's ordering key, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    ordering_key: Option<String>,
    tags: Option<Vec<String>>,
    /// When its deliveries were scheduled for, if not at once.
    deliver_at: Option<String>,
    payload: Box<RawValue>,
    timestamp: String,
    /// hookd addition, in lists only: the message's status column.
    #[serde(skip_serializing_if = "Option::is_none")]
    deliveries: Option<DeliveriesOut>,
}

/// How a message's deliveries stand, counted (`pending` includes attempts in flight).
#[derive(Clone, Serialize)]
struct DeliveriesOut {
    succeeded: u32,
    pending: u32,
    failed: u32,
}

impl From<DeliveryTally> for DeliveriesOut {
    fn from(tally: DeliveryTally) -> Self {
        Self {
            succeeded: tally.succeeded,
            pending: tally.pending,
            failed: tally.failed,
        }
    }
}

impl MessageOut {
    /// The message as the API shows it; `with_content: false` shows `{}` in place of the
    /// payload, and a payload expunged or past its retention shows `{"expired": true}`, as
    /// Svix does.
    pub fn new(mut message: Message, with_content: bool) -> Self {
        let payload = match message.payload.take() {
            _ if !with_content => raw("{}"),
            None => raw(r#"{"expired":true}"#),
            Some(bytes) => String::from_utf8(bytes)
                .ok()
                .and_then(|text| RawValue::from_string(text).ok())
                .unwrap_or_else(|| raw("{}")),
        };
        Self::with_payload(message, payload)
    }

    /// A message just published, answered with the payload as the request carried it: its
    /// bytes are those stored, and already known to be JSON.
    fn published(message: Message, payload: Box<RawValue>, with_content: bool) -> Self {
        Self::with_payload(message, if with_content { payload } else { raw("{}") })
    }

    fn with_payload(message: Message, payload: Box<RawValue>) -> Self {
        Self {
            id: message.id.to_string(),
            event_type: message.event_type,
            event_id: message.event_id,
            channels: message.channels,
            ordering_key: message.ordering_key,
            tags: message.tags,
            deliver_at: message.deliver_at.map(Timestamp::to_rfc3339),
            payload,
            timestamp: message.created_at.to_rfc3339(),
            deliveries: None,
        }
    }
}

fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).expect("a JSON literal")
}

impl MessageIn {
    async fn validate(&self, state: &ApiState) -> Result<(), ApiError> {
        hookd_core::validate::message(
            &self.event_type,
            self.event_id.as_deref(),
            self.channels.as_deref(),
            self.ordering_key.as_deref(),
            self.payload.get(),
            state.config().max_payload_bytes,
        )
        .map_err(|e| match e {
            MessageError::Field { field, reason } => ApiError::body_field(field, reason),
            too_large @ MessageError::TooLarge { .. } => {
                ApiError::PayloadTooLarge(too_large.to_string())
            }
        })?;
        crate::validate::tags("tags", self.tags.as_deref())?;
        if state.config().strict_event_types {
            let known = state.event_type(&self.event_type).await?;
            match known {
                Some(et) if !et.archived => self.check_schema(et.name, et.schemas).await?,
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

    /// Holds the payload to the newest of its event type's `schemas`, if it has any, on a
    /// blocking thread: a check may take up to its step budget, which would stall every
    /// request sharing an async worker.
    async fn check_schema(
        &self,
        event_type: String,
        schemas: Option<serde_json::Value>,
    ) -> Result<(), ApiError> {
        let Some(schemas) = schemas else {
            return Ok(());
        };
        let payload = self.payload.get().to_owned();
        let checked = tokio::task::spawn_blocking(move || {
            let payload: serde_json::Value = serde_json::from_str(&payload)
                .map_err(|e| format!("cannot be read to check it: {e}"))?;
            hookd_core::schema::check_payload(&event_type, &schemas, &payload)
        });
        let checked = checked
            .await
            .map_err(|e| ApiError::Internal(format!("the payload check ended abnormally: {e}")))?;
        checked.map_err(|why| ApiError::body_field("payload", why))
    }

    /// When the event happened: `occurredAt` if given, else `now`.
    fn occurred_at(&self, now: Timestamp) -> Result<Timestamp, ApiError> {
        self.occurred_at.as_deref().map_or(Ok(now), |text| {
            Timestamp::parse_rfc3339(text).map_err(|e| {
                ApiError::body_field("occurredAt", format!("not an RFC 3339 time: {e}"))
            })
        })
    }

    /// The payload inside the Standard Webhooks envelope, where `app` or the message's event
    /// type asks for it; `None` where the producer's bytes go out as they are.
    async fn enveloped(
        &self,
        state: &ApiState,
        app: &Application,
        now: Timestamp,
    ) -> Result<Option<Vec<u8>>, ApiError> {
        let occurred_at = self.occurred_at(now)?;
        if !app.envelope && !event_type_envelopes(state, &self.event_type).await? {
            return Ok(None);
        }
        let envelope = Envelope {
            event_type: &self.event_type,
            occurred_at,
            test: false,
        };
        Ok(Some(envelope.around(self.payload.get())))
    }

    /// When the deliveries become due, if not at once.
    fn deliver_at(&self, now: Timestamp) -> Result<Option<Timestamp>, ApiError> {
        let Some(text) = &self.deliver_at else {
            return Ok(None);
        };
        let refused = |reason: String| ApiError::body_field("deliverAt", reason);
        if self.ordering_key.is_some() {
            return Err(refused(
                "a message with an orderingKey cannot be scheduled: it would hold back every \
                 later message of its key until then"
                    .into(),
            ));
        }
        let at = Timestamp::parse_rfc3339(text)
            .map_err(|e| refused(format!("not an RFC 3339 time: {e}")))?;
        let latest = now.plus(Duration::from_secs(MAX_DELIVER_AHEAD_DAYS * 86_400));
        if at <= now || at > latest {
            return Err(refused(format!(
                "must be in the future, at most {MAX_DELIVER_AHEAD_DAYS} days ahead"
            )));
        }
        Ok(Some(at))
    }

    /// When this message's content expires, if it asks for its own retention period (in days,
    /// or in hours).
    fn payload_expires_at(&self, now: Timestamp) -> Result<Option<Timestamp>, ApiError> {
        let hours = match (self.payload_retention_period, self.payload_retention_hours) {
            (None, None) => return Ok(None),
            (Some(_), Some(_)) => {
                return Err(ApiError::body_field(
                    "payloadRetentionHours",
                    "give payloadRetentionPeriod or payloadRetentionHours, not both",
                ));
            }
            (Some(days), None) => retention_hours("payloadRetentionPeriod", days, 24)?,
            (None, Some(hours)) => retention_hours("payloadRetentionHours", hours, 1)?,
        };
        Ok(Some(now.plus(Duration::from_secs(hours * 3_600))))
    }
}

/// Whether the catalog's event type `name` asks for the Standard Webhooks envelope.
pub(crate) async fn event_type_envelopes(state: &ApiState, name: &str) -> Result<bool, ApiError> {
    Ok(state.event_type(name).await?.is_some_and(|et| et.envelope))
}

/// Counts and logs a payload over `--large-payload-bytes`: the guide asks producers to stay
/// small and link to larger data, and the operator sees who does not.
fn note_size(state: &ApiState, message: &Message) {
    let limit = state.config().large_payload_bytes;
    let size = message.payload.as_ref().map_or(0, Vec::len);
    if limit == 0 || size <= limit {
        return;
    }
    metrics::counter!(crate::observe::LARGE_PAYLOADS).increment(1);
    tracing::warn!(
        msg_id = %message.id,
        app_id = %message.app_id,
        event_type = %message.event_type,
        bytes = size,
        limit,
        "a published payload is larger than --large-payload-bytes: keep payloads small and \
         link to larger data"
    );
}

/// A retention period given in `field` as `value` units of `unit_hours` hours each, in hours:
/// from one unit up to [`MAX_RETENTION_DAYS`].
fn retention_hours(field: &str, value: i64, unit_hours: u64) -> Result<u64, ApiError> {
    let max = MAX_RETENTION_DAYS * 24 / unit_hours;
    match u64::try_from(value) {
        Ok(units @ 1..) if units <= max => Ok(units * unit_hours),
        _ => Err(ApiError::body_field(
            field,
            format!("must be from 1 to {max} (at most {MAX_RETENTION_DAYS} days)"),
        )),
    }
}

async fn create(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
    query: QueryParams,
    JsonBody(mut input): JsonBody<MessageIn>,
) -> Result<Response, ApiError> {
    // Checked first, so a refused message makes no application either.
    input.validate(&state).await?;
    let now = state.clock().now();
    let expires_at = input.payload_expires_at(now)?;
    let deliver_at = input.deliver_at(now)?;
    // An application the message carries is made by the store, in the publish's transaction.
    let (app, new_app) = match (
        state.app(&principal, &app_id).await,
        input.application.take(),
    ) {
        (Err(ApiError::NotFound(_)), Some(new)) => {
            new.validate()?;
            let app = application::new_at_path(&state, &app_id, new)?;
            (app.clone(), Some(app))
        }
        (found, _) => (found?, None),
    };
    let enveloped = input.enveloped(&state, &app, now).await?;
    let shown_as_sent = enveloped.is_none();
    let payload = enveloped.unwrap_or_else(|| input.payload.get().as_bytes().to_vec());
    let message = Message {
        id: MessageId::new(now),
        app_id: app.id,
        event_type: input.event_type,
        event_id: input.event_id,
        channels: input.channels,
        ordering_key: input.ordering_key,
        tags: input.tags,
        deliver_at,
        payload: Some(payload),
        created_at: now,
    };
    note_size(&state, &message);
    // For traces (`--otlp-endpoint`): the write, named by the message; never its payload.
    let span = tracing::debug_span!(
        "publish",
        hookd.message_id = %message.id,
        hookd.app_id = %message.app_id,
        hookd.event_type = %message.event_type,
    );
    let mut new = NewMessage::new(message).expiring(expires_at);
    if let Some(app) = new_app {
        new = new.in_app(app);
    }
    let created = state.store().publish(new).instrument(span).await?;
    // Deliveries the engine took as they were written are on their way already.
    if created.queued > 0 {
        state.wake_engine();
    }
    let with_content = query.flag("with_content", true)?;
    let out = if shown_as_sent {
        MessageOut::published(created.message, input.payload, with_content)
    } else {
        MessageOut::new(created.message, with_content)
    };
    accepted(&out)
}

/// Room in a publish's answer for everything but its payload.
const ANSWER_ROOM: usize = 512;

/// 202 with `out` as JSON, as axum's `Json` answers but written into a buffer sized for it at
/// once, rather than grown write by write from 128 bytes.
fn accepted(out: &MessageOut) -> Result<Response, ApiError> {
    let mut body = Vec::with_capacity(out.payload.get().len() + ANSWER_ROOM);
    serde_json::to_writer(&mut body, out)
        .map_err(|e| ApiError::Internal(format!("writing a publish's answer: {e}")))?;
    let mut response = Response::new(axum::body::Body::from(body));
    *response.status_mut() = StatusCode::ACCEPTED;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
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
        tag: query.get("tag").map(str::to_owned),
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
    let ids: Vec<MessageId> = page.items.iter().map(|m| m.id.clone()).collect();
    let tallies = state.store().delivery_tallies(&ids).await?;
    Ok(Json(ListOut::from_page(
        page,
        |m| m.id.to_string(),
        |m| {
            let tally = tallies.get(&m.id).copied().unwrap_or_default();
            MessageOut {
                deliveries: Some(tally.into()),
                ..MessageOut::new(m, with_content)
            }
        },
    )))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PrecheckIn {
    event_type: String,
    channels: Option<Vec<String>>,
}

#[derive(Serialize)]
struct PrecheckOut {
    active: bool,
}

/// Whether a message of this event type and channels would reach any enabled endpoint of the
/// application now (Svix's `message.precheck`): a producer can skip building a payload nobody
/// would receive. Endpoints are read a page at a time until one takes it.
async fn precheck(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path(app_id): Path<String>,
    JsonBody(input): JsonBody<PrecheckIn>,
) -> Result<Json<PrecheckOut>, ApiError> {
    let app = state.app(&principal, &app_id).await?;
    let mut page = PageRequest {
        limit: PRECHECK_PAGE,
        cursor: None,
    };
    loop {
        let endpoints = state.store().list_endpoints(&app.id, &page).await?;
        let takes = |e: &hookd_core::model::Endpoint| {
            !e.disabled
                && filters_take(
                    e.event_types.as_deref(),
                    e.channels.as_deref(),
                    &input.event_type,
                    input.channels.as_deref(),
                )
        };
        if endpoints.items.iter().any(takes) {
            return Ok(Json(PrecheckOut { active: true }));
        }
        match endpoints.items.last() {
            Some(last) if endpoints.has_more => {
                page.cursor = Some(Cursor::After(last.id.to_string()));
            }
            _ => return Ok(Json(PrecheckOut { active: false })),
        }
    }
}

/// Endpoints read per page by [`precheck`].
const PRECHECK_PAGE: usize = 250;

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

/// Drops the message's payload now (Svix's expunge); it can no longer be sent or resent.
async fn expunge(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Extension(caller): Extension<Caller>,
    Path((app_id, msg_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let message = find(&state, &principal, &app_id, &msg_id).await?;
    state.store().expunge_message_content(&message).await?;
    tracing::info!(target: "hookd::audit", action = "message.expunge", token_id = %caller.token_id, app_id = %message.app_id, msg_id = %message.id);
    Ok(StatusCode::NO_CONTENT)
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
