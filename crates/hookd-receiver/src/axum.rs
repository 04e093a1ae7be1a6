//! axum integration (feature `axum`): the [`Webhook`] extractor for one handler, and
//! [`VerifyLayer`] for every route under it. Both read the raw body (within axum's
//! `DefaultBodyLimit`), verify it before anything parses it, and answer a failure themselves
//! with a JSON reason, so a handler only ever sees verified webhooks.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRef, FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tower::{Layer, Service};
use webhook_signature::VerifyError;

use crate::{Webhook, WebhookVerifier};

/// Why a request was refused before its handler ran.
#[derive(Debug, thiserror::Error)]
pub enum WebhookRejection {
    /// The signature check failed: `401 {"error":"unverified","reason":…}`.
    #[error("{0}")]
    Unverified(#[from] VerifyError),
    /// The body could not be read (too large, or the connection failed): axum's status with
    /// `{"error":"unreadable_body","reason":…}`.
    #[error("{}", .0.body_text())]
    Body(#[from] BytesRejection),
}

impl IntoResponse for WebhookRejection {
    fn into_response(self) -> Response {
        let (status, error) = match &self {
            Self::Unverified(_) => (StatusCode::UNAUTHORIZED, "unverified"),
            Self::Body(rejection) => (rejection.status(), "unreadable_body"),
        };
        let reason = self.to_string();
        (
            status,
            Json(serde_json::json!({"error": error, "reason": reason})),
        )
            .into_response()
    }
}

/// Reads the body and verifies it with `verifier`.
async fn verified(
    request: Request,
    verifier: &WebhookVerifier,
) -> Result<Webhook, WebhookRejection> {
    let headers = request.headers().clone();
    let body = Bytes::from_request(request, &()).await?;
    Ok(verifier.verify(&headers, body)?)
}

/// Extracts a verified [`Webhook`], with the [`WebhookVerifier`] from the router's state
/// (the state itself, or a field of it through `FromRef`). Put it last among the extractors:
/// it consumes the body.
impl<S> FromRequest<S> for Webhook
where
    S: Send + Sync,
    WebhookVerifier: FromRef<S>,
{
    type Rejection = WebhookRejection;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        verified(request, &WebhookVerifier::from_ref(state)).await
    }
}

/// A layer that verifies every request before the routes under it see it; the handler gets
/// the [`Webhook`] as `Extension<Webhook>`, and the body bytes unchanged.
#[derive(Debug, Clone)]
pub struct VerifyLayer {
    verifier: WebhookVerifier,
}

impl VerifyLayer {
    /// Verifies with `verifier`.
    pub fn new(verifier: WebhookVerifier) -> Self {
        Self { verifier }
    }
}

impl<S> Layer<S> for VerifyLayer {
    type Service = VerifyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        VerifyService {
            inner,
            verifier: self.verifier.clone(),
        }
    }
}

/// The service [`VerifyLayer`] wraps routes in.
#[derive(Debug, Clone)]
pub struct VerifyService<S> {
    inner: S,
    verifier: WebhookVerifier,
}

impl<S> Service<Request> for VerifyService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // The clone that was polled ready is the one that must be called.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let verifier = self.verifier.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let kept = parts.clone();
            match verified(Request::from_parts(parts, body), &verifier).await {
                Ok(webhook) => {
                    let mut request = Request::from_parts(kept, Body::from(webhook.body.clone()));
                    request.extensions_mut().insert(webhook);
                    inner.call(request).await
                }
                Err(rejection) => Ok(rejection.into_response()),
            }
        })
    }
}
