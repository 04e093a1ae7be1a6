//! hookd's HTTP API, shaped after Svix's v1 API so the official Svix SDKs drive hookd
//! unchanged.
//!
//! Handlers validate input, talk to the [`hookd_store::Store`], and wake the delivery engine
//! when they write deliveries. They never send webhooks themselves. Errors are typed
//! ([`ApiError`]) and turned into HTTP in one place.
//!
//! # Layout
//! - [`routes`]: one module per resource (application, endpoint, endpoint_stats and
//!   endpoint_health (its figures over time, for the portal's charts), event_type,
//!   openapi_import (the catalog from an OpenAPI document), message, attempt, redelivery,
//!   background_task (replays, expunging, statistics), auth (tokens, portal access), health)
//!   and `whoami` (what the calling token may see); `ingest`, the ingest gateway: Svix Ingest's
//!   source API under `/ingest/api/v1` and the public route providers send to.
//! - [`auth`]: bearer tokens → [`Principal`] (admin or one application), read-only scope,
//!   expiry, the per-token rate limit and the `hookd::audit` line of every request.
//! - [`permissions`]: the permission table, every authenticated route and the kinds of token
//!   that may use it, which [`auth`] consults for every request (`docs/permissions.md`).
//! - `rate_limit`: the per-token request buckets.
//! - `idempotency`: `Idempotency-Key` replays.
//! - `cache`: the short-lived token and application caches of the hot path.
//! - `connections`: the bound on open connections ([`ConnectionLimit`]) and the cap per client
//!   address; at either, an open connection makes room for a new one (unused and idle ones
//!   first, and only the client's own at its cap).
//! - `overload`: the bound on requests in progress (503 past it), which [`observe`]'s layer
//!   holds every request to.
//! - `server`: the accept loop ([`serve`]): HTTP/1.1, every connection closed once it has
//!   waited too long for a request head ([`Timeouts`]: a short deadline for a new
//!   connection's first), so a silent one cannot hold a slot of the limit.
//! - [`observe`]: the `x-request-id` of every request, its tracing span, and the request
//!   metrics by route template, in the one layer in front of every request (with the bound on
//!   requests in progress and a panicking handler's 500).
//! - `extract`: JSON body and query extractors whose errors name the field.
//! - `list`: the list envelope and cursor parameters.
//! - `validate`: field checks (URLs, names, custom headers).
//! - `operations`: the operational webhooks the endpoint routes send (`endpoint.created`, …),
//!   with the reason an endpoint disabled through the API carries; it imports no route.
//! - [`error`]: [`ApiError`] and its one mapping to HTTP.
//! - [`state`]: [`ApiState`] and [`ApiConfig`].

/// `$path` under [`API_PREFIX`], for a route of it: routes carry their whole path, since a
/// nested router would rewrite the URI of every request it takes.
macro_rules! v1 {
    ($path:literal) => {
        concat!("/api/v1", $path)
    };
}

pub mod auth;
mod cache;
mod connections;
pub mod error;
mod extract;
mod idempotency;
mod list;
pub mod observe;
mod operations;
mod overload;
pub mod permissions;
mod rate_limit;
pub mod routes;
mod server;
pub mod state;
mod validate;

use axum::Router;
use axum::extract::DefaultBodyLimit;

pub use auth::{NewToken, Principal, create_admin_token, issue_token, token_hash};
pub use connections::ConnectionLimit;
pub use error::ApiError;
pub use server::{Timeouts, serve};
pub use state::{ApiConfig, ApiState};

/// Room for the envelope around the largest accepted payload.
const ENVELOPE_ALLOWANCE: usize = 64 * 1024;

/// Where the API is served; the paths of [`permissions::TABLE`] are under it, but the ingest
/// API's, which are under [`routes::ingest::INGEST_PREFIX`].
pub const API_PREFIX: &str = v1!("");

/// `path` as it reads under [`API_PREFIX`] (`/app/app_1/msg`): what audit lines show and
/// `Idempotency-Key`s are scoped by. The ingest API's paths, elsewhere, are left whole.
pub(crate) fn path_in_api(path: &str) -> &str {
    path.strip_prefix(API_PREFIX)
        .filter(|rest| rest.starts_with('/'))
        .unwrap_or(path)
}

/// The whole API under [`API_PREFIX`].
pub fn router(state: ApiState) -> Router {
    let authenticate =
        |routes: Router<ApiState>| routes.layer(auth::Authenticate::new(state.clone()));
    let authenticated = authenticate(authenticated_routes());
    let ingest = authenticate(routes::ingest::routes());
    let body_limit = state.config().max_payload_bytes + ENVELOPE_ALLOWANCE;
    let in_flight = overload::InFlight::new(state.config().max_in_flight);
    Router::new()
        .merge(routes::health::routes())
        .merge(authenticated)
        .merge(ingest)
        .merge(routes::ingest::receive_routes())
        .fallback(|| async { ApiError::NotFound("route") })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(
            tower::ServiceBuilder::new()
                .layer(observe::Front::new(in_flight))
                .layer(DefaultBodyLimit::max(body_limit)),
        )
        .with_state(state)
}

/// Every route that takes a token: each has its row in [`permissions::TABLE`].
pub(crate) fn authenticated_routes() -> Router<ApiState> {
    Router::new()
        .merge(routes::application::routes())
        .merge(routes::endpoint::routes())
        .merge(routes::destination::routes())
        .merge(routes::endpoint_stats::routes())
        .merge(routes::endpoint_health::routes())
        .merge(routes::event_type::routes())
        .merge(routes::message::routes())
        .merge(routes::attempt::routes())
        .merge(routes::redelivery::routes())
        .merge(routes::background_task::routes())
        .merge(routes::openapi_import::routes())
        .merge(routes::auth::routes())
        .merge(routes::whoami::routes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_under_the_prefix_but_the_ingest_apis() {
        assert_eq!(path_in_api("/api/v1/app/app_1/msg"), "/app/app_1/msg");
        assert_eq!(path_in_api("/api/v1"), "/api/v1");
        assert_eq!(path_in_api("/api/v1x/app"), "/api/v1x/app");
        assert_eq!(
            path_in_api("/ingest/api/v1/source"),
            "/ingest/api/v1/source"
        );
    }
}
