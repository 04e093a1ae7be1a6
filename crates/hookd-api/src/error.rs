//! [`ApiError`]: every way a request can fail, mapped to HTTP in exactly one place.
//!
//! Bodies follow Svix: `{"code": …, "detail": "…"}`, except validation (422), whose `detail`
//! lists the failing fields as `{"loc": ["body", "url"], "msg": …, "type": …}` so the official
//! SDKs raise their `HTTPValidationError` with the field named.

use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hookd_store::StoreError;
use serde_json::json;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON at all, or the request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// No token, or one hookd does not know (or that has expired).
    #[error("missing or invalid API token")]
    Unauthorized,
    /// A valid token used outside its scope.
    #[error("this token may not access this resource")]
    Forbidden,
    /// What the path names does not exist (or is not visible to this token).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A unique key is taken.
    #[error("{0}")]
    Conflict(String),
    /// The body (or the payload in it) is larger than the server accepts; the text says which.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A field has a value the API does not accept; `location` is e.g. `["body", "url"]`.
    #[error("{}: {message}", location.join("."))]
    Validation {
        location: Vec<String>,
        message: String,
    },
    /// The token made more requests than its rate limit allows; nothing was done.
    #[error(
        "this token is limited to {limit} requests per second; retry after {retry_after_secs} s"
    )]
    RateLimited { retry_after_secs: u64, limit: u32 },
    /// More requests are in progress than the server takes at once; nothing was done.
    #[error("the server is busy; retry shortly")]
    Overloaded,
    /// The database cannot take the request now; nothing was stored.
    #[error("the service is temporarily unavailable: {0}")]
    Unavailable(String),
    /// A bug. Logged with its detail; the caller sees a generic message.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    /// A validation failure of the body field `field` (dotted path allowed).
    pub fn body_field(field: &str, message: impl Into<String>) -> Self {
        Self::field("body", field, message)
    }

    /// A request with a method its path is not routed for.
    pub(crate) fn method_not_allowed() -> Self {
        Self::BadRequest("this method is not allowed on this path".into())
    }

    /// A validation failure of the query parameter `name`.
    pub fn query_param(name: &str, message: impl Into<String>) -> Self {
        Self::field("query", name, message)
    }

    fn field(section: &str, field: &str, message: impl Into<String>) -> Self {
        let mut location = vec![section.to_owned()];
        location.extend(
            field
                .split('.')
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        Self::Validation {
            location,
            message: message.into(),
        }
    }

    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Validation { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Overloaded | Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "bad_request",
            Self::Unauthorized => "authentication_failed",
            Self::Forbidden => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::Conflict(_) => "conflict",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::Validation { .. } => "validation",
            Self::RateLimited { .. } => "rate_limited",
            Self::Overloaded => "overloaded",
            Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal",
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict(what) => Self::Conflict(what),
            StoreError::NotFound(what) => Self::NotFound(what),
            StoreError::Unavailable(why) => Self::Unavailable(why),
            StoreError::Config(why) | StoreError::Corrupt(why) => Self::Internal(why),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = match &self {
            Self::Validation { location, message } => json!({
                "code": self.code(),
                "detail": [{ "loc": location, "msg": message, "type": "value_error" }],
            }),
            Self::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                json!({ "code": self.code(), "detail": self.to_string() })
            }
            Self::Unavailable(detail) => {
                tracing::warn!(%detail, "database unavailable");
                json!({ "code": self.code(), "detail": "the database is unavailable; retry later" })
            }
            _ => json!({ "code": self.code(), "detail": self.to_string() }),
        };
        let mut response = (status, axum::Json(body)).into_response();
        if let Self::RateLimited {
            retry_after_secs, ..
        } = self
        {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs));
        }
        response
    }
}
