//! `/api/v1/app/{app}/endpoint`: the URLs of an application that receive its messages, with
//! their filters, signing keys (read, rotated) and custom headers.
//!
//! Creating, changing and deleting an endpoint tell the operator through operational webhooks
//! (see [`crate::operations`]).
//!
//! # Layout
//! As Svix's server lays out its endpoint routes:
//! - `crud`: list, create, read, replace (PUT), patch and delete an endpoint.
//! - `secret`: the endpoint's signing keys: read the current one, rotate, change under a
//!   compare-and-swap.
//! - `digests`: the digests of signing keys: a supplied key another endpoint holds is
//!   refused; a secret is shown once when the server asks for it.
//! - `headers`: the custom headers sent with every delivery.
//! - `models`: the request and response bodies, their checks, and how a body becomes or
//!   changes an [`Endpoint`].
//! - `operational`: Svix's `/operational-webhook/endpoint` routes, which are these routes for
//!   the reserved operations application.

pub(crate) mod crud;
mod digests;
pub(crate) mod headers;
pub(crate) mod models;
mod operational;
pub(crate) mod secret;

use axum::Router;
use axum::routing::{get, post};
use hookd_core::destination::Destination;
use hookd_core::model::Endpoint;

pub(crate) use crud::{delete, insert, save};
pub(crate) use digests::refuse_supplied_secret;
pub(crate) use headers::place;
pub use models::EndpointOut;
pub(crate) use models::{HeadersOut, RotateIn, SealedChange, SecretOut, set_disabled};
pub(crate) use secret::{open_keys, rotate, shown_secret};

use crate::{ApiError, ApiState, Principal};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(
            v1!("/app/{app_id}/endpoint"),
            get(crud::list).post(crud::create),
        )
        .route(
            v1!("/app/{app_id}/endpoint/{endpoint_id}"),
            get(crud::fetch)
                .put(crud::upsert)
                .patch(crud::patch)
                .delete(crud::remove),
        )
        .route(
            v1!("/app/{app_id}/endpoint/{endpoint_id}/secret"),
            get(secret::secret),
        )
        .route(
            v1!("/app/{app_id}/endpoint/{endpoint_id}/secret/rotate"),
            post(secret::rotate_secret),
        )
        .route(
            v1!("/app/{app_id}/endpoint/{endpoint_id}/headers"),
            get(headers::headers)
                .put(headers::replace_headers)
                .patch(headers::patch_headers),
        )
        .route(
            v1!("/operational-webhook/endpoint"),
            get(operational::list).post(operational::create),
        )
        .route(
            v1!("/operational-webhook/endpoint/{endpoint_id}"),
            get(operational::fetch)
                .put(operational::upsert)
                .delete(operational::remove),
        )
        .route(
            v1!("/operational-webhook/endpoint/{endpoint_id}/secret"),
            get(operational::secret),
        )
        .route(
            v1!("/operational-webhook/endpoint/{endpoint_id}/secret/rotate"),
            post(operational::rotate_secret),
        )
        .route(
            v1!("/operational-webhook/endpoint/{endpoint_id}/headers"),
            get(operational::headers).put(operational::replace_headers),
        )
}

/// The endpoint of an application visible to `principal`, by id or uid, if it has a delivery
/// log (an HTTP endpoint or any destination but a polling one): what the delivery-log,
/// recovery and statistics routes act on.
pub(crate) async fn find(
    state: &ApiState,
    principal: &Principal,
    app_id: &str,
    endpoint_id: &str,
) -> Result<Endpoint, ApiError> {
    find_where(
        state,
        principal,
        app_id,
        endpoint_id,
        Destination::is_delivered,
        "endpoint",
    )
    .await
}

/// [`find`] for an HTTP endpoint only: what the endpoint routes show and change.
async fn find_http(
    state: &ApiState,
    principal: &Principal,
    app_id: &str,
    endpoint_id: &str,
) -> Result<Endpoint, ApiError> {
    let http = |d: &Destination| *d == Destination::Http;
    find_where(state, principal, app_id, endpoint_id, http, "endpoint").await
}

/// The endpoint of an application visible to `principal`, by id or uid, if `accept` takes its
/// kind; else `what` is not found.
pub(crate) async fn find_where(
    state: &ApiState,
    principal: &Principal,
    app_id: &str,
    endpoint_id: &str,
    accept: impl Fn(&Destination) -> bool,
    what: &'static str,
) -> Result<Endpoint, ApiError> {
    let app = state.app(principal, app_id).await?;
    state
        .store()
        .get_endpoint(&app.id, endpoint_id)
        .await?
        .filter(|ep| accept(&ep.destination))
        .ok_or(ApiError::NotFound(what))
}
