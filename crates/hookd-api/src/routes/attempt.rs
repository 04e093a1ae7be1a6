//! The delivery log: attempts by message and by endpoint, one attempt, where a message went
//! (attempted destinations) and what an endpoint was sent (attempted messages); and dropping
//! an attempt's response body when an endpoint answered with something sensitive.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get};
use axum::{Extension, Json, Router};
use hookd_core::model::{Attempt, Delivery, Endpoint, Message};
use hookd_core::{AppId, EndpointId, MessageId};
use hookd_store::{AttemptFilter, Page};
use serde::Serialize;

use crate::auth::Caller;
use crate::extract::QueryParams;
use crate::list::{ListOut, page_request};
use crate::routes::{endpoint, message};
use crate::{ApiError, ApiState, Principal};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(v1!("/app/{app_id}/attempt/msg/{msg_id}"), get(by_message))
        .route(
            v1!("/app/{app_id}/attempt/endpoint/{endpoint_id}"),
            get(by_endpoint),
        )
        .route(
            v1!("/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}"),
            get(one),
        )
        .route(
            v1!("/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}/content"),
            delete(expunge),
        )
        .route(
            v1!("/app/{app_id}/msg/{msg_id}/endpoint"),
            get(destinations),
        )
        .route(
            v1!("/app/{app_id}/endpoint/{endpoint_id}/msg"),
            get(endpoint_messages),
        )
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AttemptOut {
    id: String,
    msg_id: String,
    endpoint_id: String,
    url: String,
    response: String,
    /// hookd addition: the response's status line and headers, capped; empty without one.
    response_head: String,
    response_status_code: i16,
    response_duration_ms: i64,
    status: i16,
    status_text: &'static str,
    trigger_type: i16,
    timestamp: String,
    /// The message attempted, with `with_msg=true` (Svix's).
    #[serde(skip_serializing_if = "Option::is_none")]
    msg: Option<message::MessageOut>,
}

impl From<Attempt> for AttemptOut {
    fn from(a: Attempt) -> Self {
        Self {
            id: a.id.to_string(),
            msg_id: a.message_id.to_string(),
            endpoint_id: a.endpoint_id.to_string(),
            url: a.url,
            response: a.response,
            response_head: a.response_head,
            response_status_code: a.response_status_code,
            response_duration_ms: a.response_duration_ms,
            status: a.status.code(),
            status_text: a.status.text(),
            trigger_type: a.trigger_type.code(),
            timestamp: a.created_at.to_rfc3339(),
            msg: None,
        }
    }
}

/// Where a delivery stands, flattened into the record it is about.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WithDelivery<T> {
    #[serde(flatten)]
    record: T,
    status: i16,
    status_text: &'static str,
    next_attempt: Option<String>,
    /// hookd addition: the message this one waits behind, while it waits its turn in its
    /// ordering key (see `orderingKey`).
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting_behind: Option<String>,
}

impl<T> WithDelivery<T> {
    fn new(record: T, delivery: &Delivery, heads: &Heads) -> Self {
        let waiting_behind = delivery
            .ordering_key
            .clone()
            .filter(|_| delivery.is_waiting())
            .and_then(|key| heads.get(&(delivery.endpoint_id.clone(), key)))
            .map(ToString::to_string);
        Self {
            record,
            status: delivery.status.code(),
            status_text: delivery.status.text(),
            next_attempt: delivery.next_attempt_at.map(|t| t.to_rfc3339()),
            waiting_behind,
        }
    }
}

/// The message each (endpoint, ordering key) has queued: what its waiting deliveries wait for.
type Heads = HashMap<(EndpointId, String), MessageId>;

/// The heads the waiting ones of `deliveries` wait behind, in one read.
async fn heads_of<'a>(
    state: &ApiState,
    deliveries: impl Iterator<Item = &'a Delivery>,
) -> Result<Heads, ApiError> {
    let keys: Vec<(EndpointId, String)> = deliveries
        .filter(|d| d.is_waiting())
        .filter_map(|d| Some((d.endpoint_id.clone(), d.ordering_key.clone()?)))
        .collect();
    if keys.is_empty() {
        return Ok(Heads::new());
    }
    Ok(state.store().heads_of(&keys).await?)
}

fn attempt_filter(query: &QueryParams) -> Result<AttemptFilter, ApiError> {
    Ok(AttemptFilter {
        status: query.delivery_status("status")?,
        before: query.timestamp("before")?,
        after: query.timestamp("after")?,
    })
}

/// A page of attempts, each with its message when `messages` has it (`with_msg=true`).
fn attempts(
    page: Page<Attempt>,
    messages: &HashMap<MessageId, message::MessageOut>,
) -> Json<ListOut<AttemptOut>> {
    Json(ListOut::from_page(
        page,
        |a| a.id.to_string(),
        |a| AttemptOut {
            msg: messages.get(&a.message_id).cloned(),
            ..AttemptOut::from(a)
        },
    ))
}

/// The messages a page of attempts was of, as `with_msg=true` shows them (`with_content`
/// applies), or none without it.
async fn attempted_messages(
    state: &ApiState,
    app: &AppId,
    page: &Page<Attempt>,
    query: &QueryParams,
) -> Result<HashMap<MessageId, message::MessageOut>, ApiError> {
    let mut messages = HashMap::new();
    if !query.flag("with_msg", false)? {
        return Ok(messages);
    }
    let with_content = query.flag("with_content", true)?;
    for attempt in &page.items {
        if messages.contains_key(&attempt.message_id) {
            continue;
        }
        if let Some(m) = state
            .store()
            .get_message(app, attempt.message_id.as_str())
            .await?
        {
            messages.insert(m.id.clone(), message::MessageOut::new(m, with_content));
        }
    }
    Ok(messages)
}

async fn by_message(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, msg_id)): Path<(String, String)>,
    query: QueryParams,
) -> Result<Json<ListOut<AttemptOut>>, ApiError> {
    let msg = message::find(&state, &principal, &app_id, &msg_id).await?;
    let page = state
        .store()
        .list_attempts_by_message(
            &msg.app_id,
            &msg,
            &attempt_filter(&query)?,
            &page_request(&query)?,
        )
        .await?;
    let messages = attempted_messages(&state, &msg.app_id, &page, &query).await?;
    Ok(attempts(page, &messages))
}

async fn by_endpoint(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    query: QueryParams,
) -> Result<Json<ListOut<AttemptOut>>, ApiError> {
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    let page = state
        .store()
        .list_attempts_by_endpoint(&ep, &attempt_filter(&query)?, &page_request(&query)?)
        .await?;
    let messages = attempted_messages(&state, &ep.app_id, &page, &query).await?;
    Ok(attempts(page, &messages))
}

async fn one(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, msg_id, attempt_id)): Path<(String, String, String)>,
) -> Result<Json<AttemptOut>, ApiError> {
    let msg = message::find(&state, &principal, &app_id, &msg_id).await?;
    let attempt = state.store().get_attempt(&msg, &attempt_id).await?;
    Ok(Json(attempt.ok_or(ApiError::NotFound("attempt"))?.into()))
}

/// Drops the attempt's response body and head now (Svix's expunge): it then reads `EXPUNGED`.
async fn expunge(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Extension(caller): Extension<Caller>,
    Path((app_id, msg_id, attempt_id)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let msg = message::find(&state, &principal, &app_id, &msg_id).await?;
    state
        .store()
        .expunge_attempt_content(&msg, &attempt_id)
        .await?;
    tracing::info!(target: "hookd::audit", action = "attempt.expunge", token_id = %caller.token_id, app_id = %msg.app_id, msg_id = %msg.id, attempt_id);
    Ok(StatusCode::NO_CONTENT)
}

async fn destinations(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, msg_id)): Path<(String, String)>,
) -> Result<Json<ListOut<WithDelivery<endpoint::EndpointOut>>>, ApiError> {
    let msg = message::find(&state, &principal, &app_id, &msg_id).await?;
    let routed = state
        .store()
        .list_message_deliveries(&msg.app_id, &msg)
        .await?;
    let heads = heads_of(&state, routed.iter().map(|(_, d)| d)).await?;
    let page = Page {
        items: routed,
        has_more: false,
    };
    Ok(Json(ListOut::from_page(
        page,
        |(ep, _): &(Endpoint, Delivery)| ep.id.to_string(),
        |(ep, delivery)| WithDelivery::new(ep.into(), &delivery, &heads),
    )))
}

async fn endpoint_messages(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Path((app_id, endpoint_id)): Path<(String, String)>,
    query: QueryParams,
) -> Result<Json<ListOut<WithDelivery<message::MessageOut>>>, ApiError> {
    let ep = endpoint::find(&state, &principal, &app_id, &endpoint_id).await?;
    let with_content = query.flag("with_content", true)?;
    let page = state
        .store()
        .list_endpoint_deliveries(&ep, &attempt_filter(&query)?, &page_request(&query)?)
        .await?;
    let heads = heads_of(&state, page.items.iter().map(|(_, d)| d)).await?;
    Ok(Json(ListOut::from_page(
        page,
        |(m, _): &(Message, Delivery)| m.id.to_string(),
        |(m, delivery)| {
            WithDelivery::new(message::MessageOut::new(m, with_content), &delivery, &heads)
        },
    )))
}
