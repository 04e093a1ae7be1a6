//! `/api/v1/auth`: API tokens (hookd addition: create, list, revoke), logging out the calling
//! token, and Svix's app-portal access, which hands a customer a token scoped to their
//! application and a link into the portal.
//!
//! Token text exists only in the answer that creates it; the store keeps its digest. Every
//! creation and revocation leaves an audit line (target `hookd::audit`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use hookd_core::model::Application;
use hookd_core::{AppId, Timestamp};
use hookd_store::ApiToken;
use serde::{Deserialize, Serialize};

use crate::auth::{Caller, NewToken, issue_token};
use crate::extract::{JsonBody, QueryParams};
use crate::list::{ListOut, page_request};
use crate::routes::application::ApplicationIn;
use crate::{ApiError, ApiState, Principal, validate};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(v1!("/auth/token"), get(list).post(create))
        .route(v1!("/auth/token/{token_id}"), delete(revoke))
        .route(v1!("/auth/logout"), post(logout))
        .route(
            v1!("/auth/app-portal-access/{app_id}"),
            post(app_portal_access),
        )
}

/// Longest and shortest life of a portal token, as Svix allows; the default is the longest.
const PORTAL_EXPIRY: std::ops::RangeInclusive<u64> = 3600..=7 * 24 * 3600;

/// Body of token creation.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TokenIn {
    #[serde(default)]
    name: String,
    /// The application (id or uid) the token is limited to; none for an admin token.
    app_id: Option<String>,
    /// The token stops working this many seconds after creation; never, without it.
    expires_in_seconds: Option<u64>,
    /// Requests per second; the server's default without it.
    rate_limit: Option<u32>,
    #[serde(default)]
    read_only: bool,
}

/// A token as listed: never its text.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TokenOut {
    id: String,
    name: String,
    /// `null` for an admin token.
    app_id: Option<String>,
    created_at: String,
    expires_at: Option<String>,
    revoked_at: Option<String>,
    rate_limit: Option<u32>,
    read_only: bool,
}

impl From<ApiToken> for TokenOut {
    fn from(token: ApiToken) -> Self {
        Self {
            id: token.id,
            name: token.name,
            app_id: token.app_id.map(|a| a.to_string()),
            created_at: token.created_at.to_rfc3339(),
            expires_at: token.expires_at.map(Timestamp::to_rfc3339),
            revoked_at: token.revoked_at.map(Timestamp::to_rfc3339),
            rate_limit: token.rate_limit,
            read_only: token.read_only,
        }
    }
}

/// A token just created: the record and, this once, its text.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TokenCreatedOut {
    /// The token itself, shown only here.
    token: String,
    #[serde(flatten)]
    record: TokenOut,
}

async fn create(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Extension(caller): Extension<Caller>,
    JsonBody(input): JsonBody<TokenIn>,
) -> Result<Response, ApiError> {
    if !input.name.is_empty() {
        validate::text("name", &input.name, 256)?;
    }
    let app_id = match &input.app_id {
        Some(app) => Some(state.app(&principal, app).await?.id),
        None => None,
    };
    if input.rate_limit == Some(0) {
        return Err(ApiError::body_field("rateLimit", "must be at least 1"));
    }
    let now = state.clock().now();
    let expires_at = input
        .expires_in_seconds
        .map(|secs| now.plus(std::time::Duration::from_secs(secs)));
    let new = NewToken {
        app_id,
        name: input.name,
        expires_at,
        rate_limit: input.rate_limit,
        read_only: input.read_only,
        endpoint_id: None,
    };
    let (text, token) = issue_token(state.store(), now, new).await?;
    audit_issue(&caller, &token, "token.create");
    let out = TokenCreatedOut {
        token: text,
        record: token.into(),
    };
    Ok((StatusCode::CREATED, Json(out)).into_response())
}

pub(crate) fn audit_issue(caller: &Caller, token: &ApiToken, action: &'static str) {
    let app_id = token.app_id.as_ref().map(AppId::as_str);
    tracing::info!(target: "hookd::audit", action, token_id = %caller.token_id, new_token_id = %token.id, app_id, expires_at = token.expires_at.map(Timestamp::as_millis));
}

async fn list(
    State(state): State<ApiState>,
    query: QueryParams,
) -> Result<Json<ListOut<TokenOut>>, ApiError> {
    let page = state.store().list_tokens(&page_request(&query)?).await?;
    Ok(Json(ListOut::from_page(
        page,
        |t| t.id.clone(),
        TokenOut::from,
    )))
}

async fn revoke(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
    Path(token_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    revoke_token(&state, &caller, &token_id).await
}

/// Revokes `token_id`; this process stops accepting it at once.
async fn revoke_token(
    state: &ApiState,
    caller: &Caller,
    token_id: &str,
) -> Result<StatusCode, ApiError> {
    state
        .store()
        .revoke_token(token_id, state.clock().now())
        .await?;
    state.tokens().clear();
    tracing::info!(target: "hookd::audit", action = "token.revoke", token_id = %caller.token_id, revoked_token_id = token_id);
    Ok(StatusCode::NO_CONTENT)
}

/// Svix's logout: revokes the token that makes the request.
async fn logout(
    State(state): State<ApiState>,
    Extension(caller): Extension<Caller>,
) -> Result<StatusCode, ApiError> {
    if caller.token_id == crate::auth::CONFIGURED_TOKEN_ID {
        return Err(ApiError::BadRequest(
            "a token given in hookd's configuration cannot be logged out; remove it there".into(),
        ));
    }
    revoke_token(&state, &caller, &caller.token_id.clone()).await
}

/// Svix's `AppPortalAccessIn`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PortalAccessIn {
    /// Creates the application when the path names none.
    application: Option<ApplicationIn>,
    /// Seconds the token lives: 1 hour..=7 days, 7 days by default.
    expiry: Option<u64>,
    #[serde(default)]
    read_only: bool,
    /// Svix's finer capabilities; hookd's tokens are all or read-only, so only the full set
    /// (or none) is accepted.
    capabilities: Option<Vec<String>>,
    #[serde(default)]
    feature_flags: Vec<String>,
    #[allow(dead_code)] // Accepted for the SDKs' sake; hookd has no "expire all by session".
    session_id: Option<String>,
}

/// Svix's `AppPortalAccessOut`.
#[derive(Serialize)]
pub(crate) struct PortalAccessOut {
    url: String,
    token: String,
}

/// Capabilities a full-access portal token has (Svix's names).
const FULL_ACCESS: &[&str] = &[
    "ViewBase",
    "ViewEndpointSecret",
    "ManageEndpointSecret",
    "ManageEndpoint",
    "CreateAttempts",
];

impl PortalAccessIn {
    fn validate(&self) -> Result<std::time::Duration, ApiError> {
        let expiry = portal_expiry(self.expiry)?;
        if let Some(capabilities) = &self.capabilities {
            let known = |c: &String| FULL_ACCESS.contains(&c.as_str());
            let full = FULL_ACCESS
                .iter()
                .all(|f| capabilities.iter().any(|c| c == f));
            if !capabilities.iter().all(known) || !full {
                return Err(ApiError::body_field(
                    "capabilities",
                    "hookd portal tokens have full access or, with readOnly, read access; \
                     leave capabilities out",
                ));
            }
        }
        if !self.feature_flags.is_empty() {
            return Err(ApiError::body_field(
                "featureFlags",
                "hookd has no feature-flag scoping for tokens",
            ));
        }
        Ok(expiry)
    }
}

/// How long a portal token lives: `expiry` seconds (1 hour..=7 days), 7 days when not given.
pub(crate) fn portal_expiry(expiry: Option<u64>) -> Result<std::time::Duration, ApiError> {
    let expiry = expiry.unwrap_or(*PORTAL_EXPIRY.end());
    if !PORTAL_EXPIRY.contains(&expiry) {
        return Err(ApiError::body_field(
            "expiry",
            "must be between 3600 (1 hour) and 604800 (7 days)",
        ));
    }
    Ok(std::time::Duration::from_secs(expiry))
}

/// A token for one application's portal, and the link that signs the customer in with it:
/// `{public url}/portal/login#token=…` (in the fragment, so it never reaches a server log).
async fn app_portal_access(
    State(state): State<ApiState>,
    Extension(principal): Extension<Principal>,
    Extension(caller): Extension<Caller>,
    Path(app_id): Path<String>,
    JsonBody(input): JsonBody<PortalAccessIn>,
) -> Result<Json<PortalAccessOut>, ApiError> {
    let expiry = input.validate()?;
    let app = app_or_create(&state, &principal, &app_id, input.application).await?;
    let access = portal_access(&state, &caller, app.id, expiry, input.read_only).await?;
    Ok(Json(access))
}

/// Issues a portal token for `app` living `expiry`, and the link that signs in with it.
pub(crate) async fn portal_access(
    state: &ApiState,
    caller: &Caller,
    app: AppId,
    expiry: std::time::Duration,
    read_only: bool,
) -> Result<PortalAccessOut, ApiError> {
    let now = state.clock().now();
    let new = NewToken {
        app_id: Some(app),
        name: "app portal access".into(),
        expires_at: Some(now.plus(expiry)),
        rate_limit: None,
        read_only,
        endpoint_id: None,
    };
    let (token, record) = issue_token(state.store(), now, new).await?;
    audit_issue(caller, &record, "token.portal_access");
    let base = state.config().public_url.trim_end_matches('/');
    Ok(PortalAccessOut {
        url: format!("{base}/portal/login#token={token}"),
        token,
    })
}

/// The application `id_or_uid` names, created from `application` when there is none.
async fn app_or_create(
    state: &ApiState,
    principal: &Principal,
    id_or_uid: &str,
    application: Option<ApplicationIn>,
) -> Result<Application, ApiError> {
    match (state.app(principal, id_or_uid).await, application) {
        (Err(ApiError::NotFound(_)), Some(input)) => {
            input.validate()?;
            let app = input.into_new(state);
            state.store().create_app(&app).await?;
            Ok(app)
        }
        (found, _) => found,
    }
}
