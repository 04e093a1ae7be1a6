//! Bearer-token authentication and the scope a token grants.
//!
//! Tokens are never stored: only their SHA-256 digest is, in the database or in configuration.
//! A request's token is hashed and matched by digest; configured digests are compared in
//! constant time. Looked-up tokens are cached briefly so the hot publish path does not read
//! the database for every request.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;
use hookd_core::{AppId, Timestamp};
use hookd_store::{ApiToken, Store, StoreError};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{ApiError, ApiState};

/// How long a looked-up token is trusted without asking the database again.
pub(crate) const TOKEN_CACHE_TTL: Duration = Duration::from_secs(30);

/// Who is calling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// May do everything.
    Admin,
    /// May touch one application's endpoints, messages and attempts.
    App(AppId),
}

impl Principal {
    /// Fails with 403 unless this is an admin.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        match self {
            Self::Admin => Ok(()),
            Self::App(_) => Err(ApiError::Forbidden),
        }
    }

    /// Fails with 403 unless this principal may touch `app`.
    pub fn require_app(&self, app: &AppId) -> Result<(), ApiError> {
        match self {
            Self::App(own) if own != app => Err(ApiError::Forbidden),
            _ => Ok(()),
        }
    }
}

/// The lowercase hex SHA-256 of a token, the only form in which tokens are kept.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Creates and stores a new admin token, returning its text: the only time it exists in the
/// clear. Used on first start, when no admin token is configured or stored.
pub async fn create_admin_token(store: &dyn Store, now: Timestamp) -> Result<String, StoreError> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("the OS random number generator failed");
    let text = format!("hookd_{}", hex::encode(secret));
    let token = ApiToken {
        id: format!(
            "tok_{}",
            &hex::encode(Sha256::digest(text.as_bytes()))[..16]
        ),
        token_hash: token_hash(&text),
        app_id: None,
        created_at: now,
        expires_at: None,
    };
    store.create_token(&token).await?;
    Ok(text)
}

/// Middleware: resolves the bearer token to a [`Principal`] request extension, or answers 401.
pub async fn authenticate(
    State(state): State<ApiState>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let token = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(ApiError::Unauthorized)?;
    let principal = principal_for(&state, token).await?;
    request.extensions_mut().insert(principal);
    Ok(next.run(request).await)
}

async fn principal_for(state: &ApiState, token: &str) -> Result<Principal, ApiError> {
    let hash = token_hash(token);
    let configured = state
        .config()
        .configured_admin_token_hashes
        .iter()
        .fold(false, |found, known| {
            found | bool::from(known.as_bytes().ct_eq(hash.as_bytes()))
        });
    if configured {
        return Ok(Principal::Admin);
    }
    if let Some(principal) = state.tokens().get(&hash) {
        return Ok(principal);
    }
    let stored: ApiToken = state
        .store()
        .find_token(&hash)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    if !bool::from(stored.token_hash.as_bytes().ct_eq(hash.as_bytes())) {
        return Err(ApiError::Unauthorized);
    }
    if stored
        .expires_at
        .is_some_and(|at| at <= state.clock().now())
    {
        return Err(ApiError::Unauthorized);
    }
    let principal = stored.app_id.map_or(Principal::Admin, Principal::App);
    state.tokens().put(hash, principal.clone());
    Ok(principal)
}
