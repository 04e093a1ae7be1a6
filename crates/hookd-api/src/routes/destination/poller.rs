//! `/api/v1/app/{app}/poller/{id}`: a polling destination's consumers read the application's
//! messages that its filters take, oldest first, each with Standard Webhooks headers signed
//! with the destination's key; a named consumer's position is kept by the server.
//!
//! An iterator is the id of the last message a page went past (or the lowest id of a time, to
//! start there): the next page reads the messages after it. A page reads only settled messages
//! ([`hookd_store::POLL_SETTLE`]), so no message is skipped by committing late.

use axum::extract::{Path, State};
use axum::{Extension, Json};
use hookd_core::MessageId;
use hookd_core::destination::Destination;
use hookd_core::model::{Endpoint, Message, filters_take};
use hookd_store::{MessageFilter, PollRequest};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use webhook_signature::Signer;

use super::models::start_of;
use crate::auth::{Caller, NewToken, issue_token};
use crate::extract::{JsonBody, QueryParams};
use crate::list::limit;
use crate::routes::auth::audit_issue;
use crate::routes::endpoint::{find_where, open_keys};
use crate::{ApiError, ApiState};

/// Store pages one poll reads at most while the destination's filters leave them empty: a
/// poll answers in bounded time however few messages the filters take (`done` is then false).
const MAX_READS: usize = 10;

/// Svix's `PollingEndpointOut`.
#[derive(Serialize)]
pub(super) struct PollOut {
    data: Vec<PolledMessage>,
    /// Where the next poll starts; never null.
    iterator: String,
    done: bool,
}

/// Svix's `PollingEndpointMessageOut`, with the headers a consumer verifies it by.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PolledMessage {
    id: String,
    event_type: String,
    /// The payload as compact JSON: the bytes `webhook-signature` signs.
    payload: Box<RawValue>,
    timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channels: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deliver_at: Option<String>,
    headers: std::collections::BTreeMap<&'static str, String>,
}

/// Svix's `PollingEndpointConsumerSeekIn`.
#[derive(Deserialize)]
pub(super) struct SeekIn {
    after: String,
}

/// Svix's `RotatePollerTokenIn` (of its Streams' poller tokens).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RotatePollerTokenIn {
    /// Seconds the new token works; without it, until rotated or revoked.
    expiry: Option<u64>,
    /// Seconds the destination's older poller tokens keep working: 0 to 86400, 300 by default.
    old_token_expiry: Option<u64>,
}

/// The longest a poller token may be issued for (a year), and the longest its predecessors
/// keep working after a rotation (a day), as Svix allows.
const MAX_EXPIRY: u64 = 31_536_000;
const MAX_OLD_EXPIRY: u64 = 86_400;
const DEFAULT_OLD_EXPIRY: u64 = 300;

/// A new poller token: its text, shown only here.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PollerTokenOut {
    id: String,
    token: String,
    name: String,
    created_at: String,
    expires_at: Option<String>,
    scopes: Vec<String>,
}

/// Svix's `PollingEndpointConsumerSeekOut`.
#[derive(Serialize)]
pub(super) struct SeekOut {
    iterator: String,
}

/// The polling destination of an application visible to `caller`, by id or uid (a poller
/// token sees its own destination only).
async fn find_polling(
    state: &ApiState,
    caller: &Caller,
    app_id: &str,
    destination_id: &str,
) -> Result<Endpoint, ApiError> {
    let polling = |d: &Destination| *d == Destination::Polling;
    let what = "polling destination";
    let principal = &caller.principal;
    let ep = find_where(state, principal, app_id, destination_id, polling, what).await?;
    match &caller.destination {
        Some(own) if *own != ep.id => Err(ApiError::NotFound(what)),
        _ => Ok(ep),
    }
}

pub(super) async fn poll(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path((app_id, destination_id)): Path<(String, String)>,
    query: QueryParams,
) -> Result<Json<PollOut>, ApiError> {
    let ep = find_polling(&state, &caller, &app_id, &destination_id).await?;
    let start = match (iterator(&query)?, query.timestamp("after")?) {
        (Some(iterator), _) => iterator,
        (None, Some(after)) => start_of(after),
        (None, None) => start_of(ep.created_at),
    };
    let filter = MessageFilter {
        event_types: query.get("event_type").map(|t| vec![t.to_owned()]),
        channel: query.get("channel").map(str::to_owned),
        ..MessageFilter::default()
    };
    Ok(Json(
        read(&state, &ep, start, &filter, limit(&query)?).await?,
    ))
}

pub(super) async fn consumer_poll(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path((app_id, destination_id, consumer)): Path<(String, String, String)>,
    query: QueryParams,
) -> Result<Json<PollOut>, ApiError> {
    let ep = find_polling(&state, &caller, &app_id, &destination_id).await?;
    consumer_id(&consumer)?;
    let start = match iterator(&query)? {
        Some(iterator) => iterator,
        None => state
            .store()
            .consumer_position(&ep.id, &consumer)
            .await?
            .unwrap_or_else(|| start_of(ep.created_at)),
    };
    let filter = MessageFilter::default();
    let out = read(&state, &ep, start, &filter, limit(&query)?).await?;
    let now = state.clock().now();
    state
        .store()
        .set_consumer_position(&ep.id, &consumer, &out.iterator, now)
        .await?;
    Ok(Json(out))
}

pub(super) async fn consumer_seek(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path((app_id, destination_id, consumer)): Path<(String, String, String)>,
    JsonBody(input): JsonBody<SeekIn>,
) -> Result<Json<SeekOut>, ApiError> {
    let ep = find_polling(&state, &caller, &app_id, &destination_id).await?;
    consumer_id(&consumer)?;
    let after = hookd_core::Timestamp::parse_rfc3339(&input.after)
        .map_err(|e| ApiError::body_field("after", e.to_string()))?;
    let iterator = start_of(after);
    let now = state.clock().now();
    state
        .store()
        .set_consumer_position(&ep.id, &consumer, &iterator, now)
        .await?;
    Ok(Json(SeekOut { iterator }))
}

/// The `iterator` query parameter, if given: a position a poll answered.
fn iterator(query: &QueryParams) -> Result<Option<String>, ApiError> {
    match query.get("iterator").filter(|i| !i.is_empty()) {
        None => Ok(None),
        Some(text) if MessageId::looks_like(text) => Ok(Some(text.to_owned())),
        Some(_) => Err(ApiError::query_param(
            "iterator",
            "not an iterator this poller answered",
        )),
    }
}

/// A consumer's name follows the rules of a uid.
fn consumer_id(consumer: &str) -> Result<(), ApiError> {
    hookd_core::validate::name(consumer)
        .map_err(|e| ApiError::BadRequest(format!("consumer id {consumer:?}: {e}")))
}

/// Up to `limit` settled messages after `start` that `filter` and the destination's own
/// filters take (those whose payload was expunged left out), signed. A disabled destination
/// answers none and stays where it is, so enabling it again loses nothing.
async fn read(
    state: &ApiState,
    ep: &Endpoint,
    start: String,
    filter: &MessageFilter,
    limit: usize,
) -> Result<PollOut, ApiError> {
    if ep.disabled {
        return Ok(PollOut {
            data: Vec::new(),
            iterator: start,
            done: true,
        });
    }
    let now = state.clock().now();
    let keys = open_keys(state, ep)?;
    let signer = keys
        .signer_at(now)
        .map_err(|e| ApiError::Internal(format!("cannot sign for {}: {e}", ep.id)))?;
    let mut iterator = start;
    let mut data = Vec::new();
    for _ in 0..MAX_READS {
        let request = PollRequest {
            app: &ep.app_id,
            after: &iterator,
            now,
            filter,
            limit: limit - data.len(),
        };
        let page = state.store().poll_messages(&request).await?;
        for message in page.items {
            iterator = message.id.to_string();
            if takes(ep, &message) {
                data.extend(polled(&signer, message, now.as_secs())?);
            }
        }
        if data.len() == limit || !page.has_more {
            let done = !page.has_more;
            return Ok(PollOut {
                data,
                iterator,
                done,
            });
        }
    }
    Ok(PollOut {
        data,
        iterator,
        done: false,
    })
}

/// Whether the destination's filters take `message`.
fn takes(ep: &Endpoint, message: &Message) -> bool {
    filters_take(
        ep.event_types.as_deref(),
        ep.channels.as_deref(),
        &message.event_type,
        message.channels.as_deref(),
    )
}

/// `message` as a poll shows it, signed at `secs`; `None` once its payload was expunged.
fn polled(signer: &Signer, message: Message, secs: i64) -> Result<Option<PolledMessage>, ApiError> {
    let Some(payload) = &message.payload else {
        return Ok(None);
    };
    let internal =
        |e: &dyn std::fmt::Display| ApiError::Internal(format!("message {}: {e}", message.id));
    let value: serde_json::Value = serde_json::from_slice(payload).map_err(|e| internal(&e))?;
    let compact = serde_json::to_string(&value).map_err(|e| internal(&e))?;
    let id = message.id.to_string();
    let signed = signer
        .headers(&id, u64::try_from(secs).unwrap_or(0), compact.as_bytes())
        .map_err(|e| internal(&e))?;
    let headers = signed
        .pairs()
        .into_iter()
        .map(|(name, value)| (name, value.to_owned()))
        .collect();
    Ok(Some(PolledMessage {
        id,
        event_type: message.event_type,
        payload: RawValue::from_string(compact).map_err(|e| internal(&e))?,
        timestamp: message.created_at.to_rfc3339(),
        event_id: message.event_id,
        channels: message.channels,
        tags: message.tags,
        deliver_at: message.deliver_at.map(|t| t.to_rfc3339()),
        headers,
    }))
}

/// Issues a poller token for a polling destination, one that polls it and nothing else; the
/// destination's older poller tokens stop working after `oldTokenExpiry` (hookd addition,
/// shaped as Svix's Streams' poller-token rotation).
pub(super) async fn rotate_token(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path((app_id, destination_id)): Path<(String, String)>,
    JsonBody(input): JsonBody<RotatePollerTokenIn>,
) -> Result<Json<PollerTokenOut>, ApiError> {
    let ep = find_polling(&state, &caller, &app_id, &destination_id).await?;
    let seconds = |field: &str, value: Option<u64>, max: u64| match value {
        Some(secs) if secs > max => Err(ApiError::body_field(
            field,
            format!("must be between 0 and {max} seconds"),
        )),
        other => Ok(other.map(std::time::Duration::from_secs)),
    };
    let expiry = seconds("expiry", input.expiry, MAX_EXPIRY)?;
    let old = seconds("oldTokenExpiry", input.old_token_expiry, MAX_OLD_EXPIRY)?
        .unwrap_or(std::time::Duration::from_secs(DEFAULT_OLD_EXPIRY));
    let now = state.clock().now();
    state
        .store()
        .expire_poller_tokens(&ep.id, now.plus(old))
        .await?;
    let new = NewToken {
        app_id: Some(ep.app_id.clone()),
        name: format!("poller of {}", ep.id),
        expires_at: expiry.map(|e| now.plus(e)),
        endpoint_id: Some(ep.id),
        ..NewToken::default()
    };
    let (token, record) = issue_token(state.store(), now, new).await?;
    audit_issue(&caller, &record, "token.poller");
    Ok(Json(PollerTokenOut {
        id: record.id,
        token,
        name: record.name,
        created_at: record.created_at.to_rfc3339(),
        expires_at: record.expires_at.map(|t| t.to_rfc3339()),
        scopes: vec!["poller".into()],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::described::{assert_reads_as_described, assert_shows_as_described};

    #[test]
    fn the_openapi_document_describes_every_field_the_poller_reads_and_shows() {
        let message = PolledMessage {
            id: "msg_1".into(),
            event_type: "order.paid".into(),
            payload: RawValue::from_string("{}".into()).unwrap(),
            timestamp: "2026-01-01T00:00:00+00:00".into(),
            event_id: Some("e1".into()),
            channels: Some(vec!["eu".into()]),
            tags: Some(vec!["t".into()]),
            deliver_at: Some("2026-01-01T00:00:00+00:00".into()),
            headers: Default::default(),
        };
        assert_shows_as_described("PollingEndpointMessageOut", &message);
        let out = PollOut {
            data: Vec::new(),
            iterator: "msg_1".into(),
            done: true,
        };
        assert_shows_as_described("PollingEndpointOut", &out);
        assert_reads_as_described::<SeekIn>("PollingEndpointConsumerSeekIn");
        let seek = SeekOut {
            iterator: "msg_1".into(),
        };
        assert_shows_as_described("PollingEndpointConsumerSeekOut", &seek);
        assert_reads_as_described::<RotatePollerTokenIn>("RotatePollerTokenIn");
        let token = PollerTokenOut {
            id: "tok_1".into(),
            token: "hookd_x".into(),
            name: "poller".into(),
            created_at: "2026-01-01T00:00:00+00:00".into(),
            expires_at: Some("2026-01-01T00:00:00+00:00".into()),
            scopes: vec!["poller".into()],
        };
        assert_shows_as_described("PollerTokenOut", &token);
    }
}
