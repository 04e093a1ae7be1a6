//! `Idempotency-Key`: a POST repeated with the same key within 24 hours gets the first
//! response again instead of doing the work twice.
//!
//! Keys are scoped to the calling token and the request path, so two tenants' keys never
//! collide. Only answers that reflect a decision (2xx and 4xx) are kept; a 5xx means nothing
//! happened, and a retry should really be retried.
//!
//! A kept answer can hold a new API token, a portal link or an endpoint secret, so its body is
//! sealed under the master key (bound to its scoped key) like endpoint secrets: the replay
//! stays byte for byte the first answer, and the database holds only ciphertext. A body that
//! no longer opens (sealed under a master key since dropped) counts as not kept.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, header::CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use hookd_store::StoredResponse;
use sha2::{Digest, Sha256};
use tower::{Service, ServiceExt};

use crate::{ApiError, ApiState};

const KEEP_FOR: Duration = Duration::from_secs(24 * 60 * 60);
/// Larger responses are not kept (no POST answer of ours comes near it).
const MAX_KEPT_BODY: usize = 1024 * 1024;

/// `inner`'s answer to `request`, replayed or recorded for a POST that carries an
/// `Idempotency-Key` (called by [`crate::auth::authenticate`] for an admitted request).
pub async fn replay<S>(state: &ApiState, request: Request, inner: S) -> Result<Response, ApiError>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let Some(key) = scoped_key(&request) else {
        return Ok(answer(inner, request).await);
    };
    let now = state.clock().now();
    if let Some(kept) = state.store().get_idempotent_response(&key, now).await?
        && let Some(kept) = opened(state, &key, kept)
    {
        return Ok(rebuild(kept));
    }
    let response = answer(inner, request).await;
    let status = response.status();
    if status.is_server_error() {
        return Ok(response);
    }
    let (parts, body) = response.into_parts();
    let bytes = to_bytes(body, MAX_KEPT_BODY)
        .await
        .map_err(|e| ApiError::Internal(format!("reading a response to keep: {e}")))?;
    let kept = StoredResponse {
        status: status.as_u16(),
        body: state.keyring().seal(&context(&key), &bytes).into_bytes(),
    };
    state
        .store()
        .put_idempotent_response(&key, &kept, now, now.plus(KEEP_FOR))
        .await?;
    Ok(Response::from_parts(parts, Body::from(bytes)))
}

async fn answer<S>(inner: S, request: Request) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    match inner.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

fn scoped_key(request: &Request) -> Option<String> {
    if request.method() != Method::POST {
        return None;
    }
    let key = request.headers().get("idempotency-key")?.as_bytes();
    let token = request
        .headers()
        .get("authorization")
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    let mut digest = Sha256::new();
    let path = crate::path_in_api(request.uri().path());
    for part in [token, path.as_bytes(), key] {
        digest.update((part.len() as u64).to_be_bytes());
        digest.update(part);
    }
    Some(hex::encode(digest.finalize()))
}

/// What the AEAD binds a kept body to: it opens only under its own scoped key.
fn context(key: &str) -> String {
    format!("hookd idempotent response {key}")
}

/// The kept response with its body opened, or `None` if it does not open.
fn opened(state: &ApiState, key: &str, kept: StoredResponse) -> Option<StoredResponse> {
    let sealed = String::from_utf8_lossy(&kept.body);
    match state.keyring().unseal(&context(key), &sealed) {
        Ok(body) => Some(StoredResponse { body, ..kept }),
        Err(error) => {
            tracing::warn!(%error, "a kept Idempotency-Key answer does not open; not replayed");
            None
        }
    }
}

fn rebuild(kept: StoredResponse) -> Response {
    let status =
        axum::http::StatusCode::from_u16(kept.status).unwrap_or(axum::http::StatusCode::OK);
    let has_body = !kept.body.is_empty();
    let mut response = (status, kept.body).into_response();
    if has_body {
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    response
}
