//! Bearer-token authentication, the scope a token grants, its rate limit, and the audit line
//! a request leaves (tracing target `hookd::audit`, action `token.use`): every request that
//! changes something or is refused, but not reads nor publishes, which would drown the lines
//! that matter under load, unless the access log ([`crate::ApiConfig::access_log`]) asks for
//! every request.
//!
//! Tokens are never stored: only their SHA-256 digest is, in the database or in configuration.
//! A request's token is hashed and matched by digest; configured digests are compared in
//! constant time. Looked-up tokens are cached briefly so the hot publish path neither reads
//! the database nor hashes the token for every request: a token revoked through another
//! process stops working within [`TOKEN_CACHE_TTL`]; revoked through this one, at once. The
//! cache knows a token by a [`TokenKey`], never by its text.
//!
//! [`Authenticate`] is the layer of every route that takes a token: [`authenticate`], then
//! the `Idempotency-Key` replays, in one layer.

use std::convert::Infallible;
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::http::header::AUTHORIZATION;
use axum::response::{IntoResponse, Response};
use hookd_core::{AppId, EndpointId, Timestamp};
use hookd_store::{ApiToken, Store, StoreError};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tower::Service;

use crate::cache::TtlCache;
use crate::permissions::{self, TokenKind};
use crate::{ApiError, ApiState};

/// How long a looked-up token is trusted without asking the database again.
pub(crate) const TOKEN_CACHE_TTL: Duration = Duration::from_secs(30);

/// Marks a response to a publish: the data plane, left out of the audit trail unless the
/// access log is on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Publish;

/// Who is calling: the provider, or one customer (see [`crate::permissions`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// The provider: every application.
    Admin,
    /// One customer: its own application only.
    App(AppId),
}

impl Principal {
    /// Fails unless this principal may touch `app`, with the answer a missing application
    /// gets: another customer's application must not be told from one that does not exist.
    /// What each kind of token may do at all is [`crate::permissions`]'.
    pub fn require_app(&self, app: &AppId) -> Result<(), ApiError> {
        match self {
            Self::App(own) if own != app => Err(ApiError::NotFound("application")),
            _ => Ok(()),
        }
    }
}

/// The lowercase hex SHA-256 of a token, the only form in which tokens are kept.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// `bytes` in lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut text = vec![0; bytes.len() * 2];
    hex::encode_to_slice(bytes, &mut text).expect("twice as long");
    String::from_utf8(text).expect("hex digits are ASCII")
}

/// The token id of an admin token given in configuration.
pub const CONFIGURED_TOKEN_ID: &str = "configured";

/// The token behind a request, as the audit log and the limits see it.
#[derive(Clone, Debug)]
pub struct Caller {
    pub principal: Principal,
    /// The stored token's id, or `configured` for an admin token given in configuration.
    pub token_id: String,
    /// Requests per second, if limited.
    pub rate_limit: Option<u32>,
    /// May only read.
    pub read_only: bool,
    pub expires_at: Option<Timestamp>,
    /// A poller token's polling destination: it may use the poller routes of that one only.
    pub destination: Option<EndpointId>,
}

/// What a new token may do.
#[derive(Clone, Debug, Default)]
pub struct NewToken {
    /// `None` for an admin token.
    pub app_id: Option<AppId>,
    pub name: String,
    pub expires_at: Option<Timestamp>,
    pub rate_limit: Option<u32>,
    pub read_only: bool,
    /// A poller token's polling destination (of `app_id`).
    pub endpoint_id: Option<EndpointId>,
}

/// Creates and stores a token, returning its text (the only time it exists in the clear) and
/// the stored record.
pub async fn issue_token(
    store: &dyn Store,
    now: Timestamp,
    new: NewToken,
) -> Result<(String, ApiToken), StoreError> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("the OS random number generator failed");
    let text = format!("hookd_{}", hex::encode(secret));
    let hash = token_hash(&text);
    let token = ApiToken {
        id: format!("tok_{}", &hash[..16]),
        token_hash: hash,
        app_id: new.app_id,
        created_at: now,
        expires_at: new.expires_at,
        name: new.name,
        revoked_at: None,
        rate_limit: new.rate_limit,
        read_only: new.read_only,
        endpoint_id: new.endpoint_id,
    };
    store.create_token(&token).await?;
    Ok((text, token))
}

/// Creates and stores a new admin token, returning its text. Used on first start, when no
/// admin token is configured or stored.
pub async fn create_admin_token(store: &dyn Store, now: Timestamp) -> Result<String, StoreError> {
    let new = NewToken {
        name: "first-start admin token".into(),
        ..NewToken::default()
    };
    Ok(issue_token(store, now, new).await?.0)
}

/// The layer of every route that takes a token: [`authenticate`], then `Idempotency-Key`
/// replays (a hand-written layer: axum's middleware functions cost boxed services cloned per
/// request, each).
#[derive(Clone)]
pub(crate) struct Authenticate(ApiState);

impl Authenticate {
    pub(crate) fn new(state: ApiState) -> Self {
        Self(state)
    }
}

impl<S> tower::Layer<S> for Authenticate {
    type Service = Authenticated<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Authenticated {
            state: self.0.clone(),
            inner,
        }
    }
}

/// A route behind [`Authenticate`].
#[derive(Clone)]
pub(crate) struct Authenticated<S> {
    state: ApiState,
    inner: S,
}

impl<S> Service<Request> for Authenticated<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // The service polled ready serves this request; its clone waits for the next.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let state = self.state.clone();
        Box::pin(async move {
            let response = authenticate(&state, request, ready).await;
            Ok(response.unwrap_or_else(IntoResponse::into_response))
        })
    }
}

/// Resolves the bearer token to a [`Principal`] (and [`Caller`]) request extension, or answers
/// 401; answers 403 unless the permission table lets the token's kind use the route (its
/// `MatchedPath` and method); applies the token's rate limit; has `inner` answer (or replays
/// an `Idempotency-Key`'s answer); writes the audit line.
pub async fn authenticate<S>(
    state: &ApiState,
    mut request: Request,
    inner: S,
) -> Result<Response, ApiError>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
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
    let caller = caller_for(state, token).await?;
    let method = request.method().clone();
    let path = crate::path_in_api(request.uri().path()).to_owned();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let outcome = admit(state, &caller, &method, route);
    let status = match &outcome {
        Ok(()) => None,
        Err(error) => Some(error.status()),
    };
    let response = match outcome {
        Ok(()) => {
            request.extensions_mut().insert(caller.principal.clone());
            request.extensions_mut().insert(caller.clone());
            crate::idempotency::replay(state, request, inner)
                .await
                .unwrap_or_else(IntoResponse::into_response)
        }
        Err(error) => error.into_response(),
    };
    let refused = status.is_some();
    let status = status.unwrap_or_else(|| response.status()).as_u16();
    let routine = matches!(method, Method::GET | Method::HEAD)
        || response.extensions().get::<Publish>().is_some();
    if state.config().access_log || refused || !routine {
        let app_id = match &caller.principal {
            Principal::Admin => None,
            Principal::App(app) => Some(app.as_str()),
        };
        tracing::info!(target: "hookd::audit", action = "token.use", token_id = %caller.token_id, app_id, %method, path, status);
    }
    Ok(response)
}

/// Whether `caller` may make a `method` request of `route` now: expiry, the permission table,
/// rate limit.
fn admit(
    state: &ApiState,
    caller: &Caller,
    method: &Method,
    route: Option<&str>,
) -> Result<(), ApiError> {
    let now = state.clock().now();
    if caller.expires_at.is_some_and(|at| at <= now) {
        return Err(ApiError::Unauthorized);
    }
    permitted(caller, method, route)?;
    if caller.destination.is_some() && !route.is_some_and(is_poller_route) {
        return Err(ApiError::Forbidden);
    }
    let default = match caller.principal {
        Principal::App(_) => Some(state.config().app_token_rate_limit),
        Principal::Admin => None,
    };
    match caller.rate_limit.or(default).filter(|&l| l > 0) {
        Some(limit) => state
            .limiter()
            .check(&caller.token_id, limit, now)
            .map_err(|wait| ApiError::RateLimited {
                retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
                limit,
            }),
        None => Ok(()),
    }
}

/// Whether the permission table lets `caller`'s kind of token make a `method` request of
/// `route` (a path template, as routed). A route without a row is refused to every token; a
/// method its path has no row for is answered as the router answers an unrouted method.
fn permitted(caller: &Caller, method: &Method, route: Option<&str>) -> Result<(), ApiError> {
    let route = route.map(|r| r.strip_prefix(crate::API_PREFIX).unwrap_or(r));
    match route.and_then(|route| permissions::lookup(method, route)) {
        Some(rule) if rule.allows(TokenKind::of(caller)) => Ok(()),
        Some(_) => Err(ApiError::Forbidden),
        None if route.is_some_and(permissions::has_path) => Err(ApiError::method_not_allowed()),
        None => Err(ApiError::Forbidden),
    }
}

/// Whether `route` is one a poller token may use (its destination is checked by the route).
fn is_poller_route(route: &str) -> bool {
    let route = route.strip_prefix(crate::API_PREFIX).unwrap_or(route);
    route.starts_with("/app/{app_id}/poller/{sink_id}")
}

/// The [`Caller`] behind `token`: from the token cache, else by its digest, from the
/// configured admin tokens or the store.
async fn caller_for(state: &ApiState, token: &str) -> Result<Caller, ApiError> {
    let key = state.tokens().key(token);
    if let Some(caller) = state.tokens().callers.get(&key) {
        return Ok(caller);
    }
    let hash = token_hash(token);
    let configured = state
        .config()
        .configured_admin_token_hashes
        .iter()
        .fold(false, |found, known| {
            found | bool::from(known.as_bytes().ct_eq(hash.as_bytes()))
        });
    let caller = if configured {
        Caller {
            principal: Principal::Admin,
            token_id: CONFIGURED_TOKEN_ID.into(),
            rate_limit: None,
            read_only: false,
            expires_at: None,
            destination: None,
        }
    } else {
        stored_caller(state, &hash).await?
    };
    state.tokens().callers.put(key, caller.clone());
    Ok(caller)
}

/// The [`Caller`] of the stored token whose digest is `hash`, unless it is unknown or revoked.
async fn stored_caller(state: &ApiState, hash: &str) -> Result<Caller, ApiError> {
    let stored: ApiToken = state
        .store()
        .find_token(hash)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    if !bool::from(stored.token_hash.as_bytes().ct_eq(hash.as_bytes()))
        || stored.revoked_at.is_some()
    {
        return Err(ApiError::Unauthorized);
    }
    Ok(Caller {
        principal: stored.app_id.map_or(Principal::Admin, Principal::App),
        token_id: stored.id,
        rate_limit: stored.rate_limit,
        read_only: stored.read_only,
        expires_at: stored.expires_at,
        destination: stored.endpoint_id,
    })
}

/// Tokens looked up a moment ago, by [`TokenKey`], each trusted for [`TOKEN_CACHE_TTL`].
pub(crate) struct TokenCache {
    /// The SipHash keys, drawn at random when the process starts.
    keys: RandomState,
    pub(crate) callers: TtlCache<Caller, TokenKey>,
}

/// What the token cache knows a token by: two SipHash values of it under a key drawn at start
/// (128 bits nobody without the key can aim at), so the cache holds no token, and a lookup
/// compares no secret, in a time that depends only on the token's length. Hashing a token so
/// costs a fraction of its SHA-256.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TokenKey(u64, u64);

impl TokenCache {
    pub(crate) fn new() -> Self {
        Self {
            keys: RandomState::new(),
            callers: TtlCache::new(TOKEN_CACHE_TTL),
        }
    }

    pub(crate) fn key(&self, token: &str) -> TokenKey {
        // Two distinct inputs, so two independent values of one keyed function.
        TokenKey(self.keys.hash_one(token), self.keys.hash_one((1u8, token)))
    }

    /// Forgets every token (after one was revoked).
    pub(crate) fn clear(&self) {
        self.callers.clear();
    }
}
