//! `POST /ingest/in/{token}`: where providers send a source's webhooks. Public: the token in
//! the path is the credential, and the provider's signature is checked on the raw bytes.
//!
//! In order: the source by its token (404), the size limit (413), the rate limit (429), the
//! provider's scheme (401 with the reason as JSON; a bounded record of the refusal is kept and
//! counted in `hookd_ingest_rejected_total{reason}`, never the body), then the message: the
//! body's bytes unchanged as its payload, the provider's event type, the provider's event id as
//! its `eventId`, and, when the source has an ordering pointer, the value it points at in the
//! body as its ordering key. 2xx is answered only once the message is committed. An event id the source's
//! application holds already is a duplicate: answered 200 and not forwarded again (so a
//! provider's retry after a lost answer is harmless), for as long as hookd keeps event ids
//! (records kept, then `--keep-event-ids`). Slack's `url_verification` is answered with its
//! challenge and stores nothing.

use std::net::SocketAddr;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Path, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use hookd_core::model::{Message, Metadata};
use hookd_core::{MessageId, RejectionId, Timestamp};
use hookd_store::{IngestRejection, IngestRequest, IngestSource, NewMessage, StoreError};
use serde_json::json;

use super::models::Sealed;
use crate::{ApiError, ApiState, token_hash};
use hookd_ingest::{Accepted, InboundRequest, Rejection};

/// Counter: requests a source refused, by `reason`.
pub const REJECTED: &str = "hookd_ingest_rejected_total";
/// Counter: requests sources accepted, by `outcome` (`forwarded`, `duplicate`, `challenge`).
pub const ACCEPTED: &str = "hookd_ingest_accepted_total";

/// Headers kept with an accepted request at most, and the longest value kept.
const MAX_KEPT_HEADERS: usize = 64;
const MAX_KEPT_VALUE: usize = 2048;

/// Gives the metrics their help texts.
pub fn describe() {
    metrics::describe_counter!(
        REJECTED,
        "Requests an ingest source refused (never stored), by reason."
    );
    metrics::describe_counter!(
        ACCEPTED,
        "Requests ingest sources accepted, by outcome (forwarded, duplicate, challenge)."
    );
}

pub(super) async fn receive(
    State(state): State<ApiState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(token): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let now = state.clock().now();
    let source = state
        .store()
        .source_by_token(&token_hash(&token), now)
        .await?
        .ok_or(ApiError::NotFound("ingest source"))?;
    let limit = source
        .max_body_bytes
        .map_or(state.config().max_payload_bytes, |max| max as usize);
    if declared_length(&headers).is_some_and(|length| length > limit) {
        return Err(too_large(limit));
    }
    if let Some(rate) = source.rate_limit {
        let key = format!("ingest:{}", source.id);
        if let Err(wait) = state.limiter().check(&key, rate, now) {
            return Ok(rate_limited(rate, wait.as_secs() + 1));
        }
    }
    let body = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| too_large(limit))?;
    let remote = peer.map(|Extension(ConnectInfo(address))| address.ip().to_string());
    let scheme = state
        .source_schemes()
        .get_or_open(&source.id, &source.sealed, || {
            Sealed::open(&state, &source)?.scheme(&source.kind)
        })?;
    let inbound = InboundRequest {
        headers: &headers,
        body: &body,
        now: now.as_millis() / 1000,
    };
    match scheme.verify(&inbound) {
        Err(rejection) => reject(&state, &source, rejection, &headers, remote, now).await,
        Ok(Accepted::Challenge { content_type, body }) => {
            metrics::counter!(ACCEPTED, "outcome" => "challenge").increment(1);
            Ok(([(CONTENT_TYPE, content_type)], body).into_response())
        }
        Ok(Accepted::Event {
            event_id,
            event_type,
        }) => {
            let arrival = Arrival {
                headers: &headers,
                body,
                remote,
                now,
            };
            accept(&state, &source, arrival, event_type, event_id).await
        }
    }
}

/// The `content-length` a request declares, if any.
fn declared_length(headers: &HeaderMap) -> Option<usize> {
    headers.get(CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

fn too_large(limit: usize) -> ApiError {
    ApiError::PayloadTooLarge(format!(
        "this source accepts bodies of at most {limit} bytes"
    ))
}

/// 429 with `Retry-After`, in the API's error shape.
fn rate_limited(limit: u32, retry_after_secs: u64) -> Response {
    let body = json!({
        "code": "rate_limited",
        "detail": format!("this source accepts {limit} requests per second"),
    });
    let mut response = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}

/// Records a refused request (when, why, which header names, from where) and answers 401.
async fn reject(
    state: &ApiState,
    source: &IngestSource,
    rejection: Rejection,
    headers: &HeaderMap,
    remote: Option<String>,
    now: Timestamp,
) -> Result<Response, ApiError> {
    let reason = rejection.reason.as_str();
    metrics::counter!(REJECTED, "reason" => reason).increment(1);
    let record = IngestRejection {
        id: RejectionId::new(now),
        source_id: source.id.clone(),
        reason: reason.to_owned(),
        detail: rejection.detail.clone(),
        header_names: headers
            .keys()
            .map(|name| name.as_str().to_owned())
            .collect(),
        remote_addr: remote,
        received_at: now,
    };
    state.store().record_rejection(&record).await?;
    let body = json!({ "code": "rejected", "reason": reason, "detail": rejection.detail });
    Ok((StatusCode::UNAUTHORIZED, Json(body)).into_response())
}

/// A verified request, as it arrived.
struct Arrival<'a> {
    headers: &'a HeaderMap,
    body: Bytes,
    remote: Option<String>,
    now: Timestamp,
}

/// Commits the request as a message of the source's application (then its headers' record)
/// and wakes the engine: 202 with the message id, or 200 for a duplicate event id.
async fn accept(
    state: &ApiState,
    source: &IngestSource,
    arrival: Arrival<'_>,
    event_type: String,
    event_id: Option<String>,
) -> Result<Response, ApiError> {
    let message = Message {
        id: MessageId::new(arrival.now),
        app_id: source.app_id.clone(),
        event_type: event_type.clone(),
        event_id: event_id.clone(),
        channels: None,
        ordering_key: ordering_key(source, &arrival.body),
        tags: None,
        deliver_at: None,
        payload: Some(arrival.body.to_vec()),
        created_at: arrival.now,
    };
    let created = match state.store().publish(NewMessage::new(message)).await {
        Ok(created) => created,
        Err(StoreError::Conflict(_)) if event_id.is_some() => {
            metrics::counter!(ACCEPTED, "outcome" => "duplicate").increment(1);
            let body = json!({ "duplicate": true, "eventId": event_id });
            return Ok((StatusCode::OK, Json(body)).into_response());
        }
        Err(error) => return Err(error.into()),
    };
    if created.queued > 0 {
        state.wake_engine();
    }
    let request = IngestRequest {
        message_id: created.message.id.clone(),
        source_id: source.id.clone(),
        event_type,
        event_id,
        headers: kept_headers(state, arrival.headers),
        remote_addr: arrival.remote,
        received_at: arrival.now,
    };
    state.store().record_ingest_request(&request).await?;
    metrics::counter!(ACCEPTED, "outcome" => "forwarded").increment(1);
    let body = json!({ "id": created.message.id });
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// The value at the source's ordering pointer in a JSON body (a string, or a number or boolean
/// as its JSON text), if it has a pointer and the body a value there that is a valid ordering
/// key (1 to 256 bytes, no control characters); otherwise the message is not ordered.
fn ordering_key(source: &IngestSource, body: &[u8]) -> Option<String> {
    let pointer = source.ordering_pointer.as_deref()?;
    let body: serde_json::Value = serde_json::from_slice(body).ok()?;
    let key = match body.pointer(pointer)? {
        serde_json::Value::String(key) => Some(key.clone()),
        serde_json::Value::Array(_) | serde_json::Value::Object(_) | serde_json::Value::Null => {
            None
        }
        scalar => Some(scalar.to_string()),
    }?;
    hookd_core::validate::ordering_key(&key)
        .is_ok()
        .then_some(key)
}

/// The headers kept with an accepted request: the provider's and the content's, without
/// credentials (as `--sensitive-header` and the credential words name them) or the
/// connection's own, each bounded.
fn kept_headers(state: &ApiState, headers: &HeaderMap) -> Metadata {
    const CONNECTION: &[&str] = &["host", "connection", "content-length", "transfer-encoding"];
    headers
        .iter()
        .filter(|(name, _)| !CONNECTION.contains(&name.as_str()))
        .filter(|(name, _)| !state.config().credential_headers.covers(name.as_str()))
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?)))
        .map(|(name, value)| (name, value.chars().take(MAX_KEPT_VALUE).collect()))
        .take(MAX_KEPT_HEADERS)
        .collect()
}
