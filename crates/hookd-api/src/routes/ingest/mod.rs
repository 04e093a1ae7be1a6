//! The ingest gateway: hookd receiving webhooks from providers (Stripe, GitHub, Shopify,
//! Slack, any Standard Webhooks sender), checking them, keeping them and forwarding them, in
//! Svix Ingest's API shape (`/ingest/api/v1/source`).
//!
//! A source owns one application (see [`hookd_store::store::ingest`]): its endpoints are the
//! forwarding targets and its messages the accepted requests, so forwarding is the delivery
//! engine's ordinary work (signing, retries, ordering, the delivery log, the portal).
//!
//! # Layout
//! - `source`: the source routes (CRUD, token rotation, the portal link).
//! - `endpoint`: the forwarding targets' routes, which are the endpoint routes of the source's
//!   application.
//! - `receive`: the public route providers send to.
//! - `records`: what a source accepted and refused, for the portal.
//! - `models`: the bodies, and the sealed configuration and token.
//!
//! The providers' verification schemes are the `hookd-ingest` crate's.

mod endpoint;
mod models;
mod receive;
mod records;
mod source;

use axum::Router;
use axum::routing::{get, post};

pub use models::{RECEIVE_PREFIX, SourceOut};
pub use receive::describe;

use crate::ApiState;

/// Where the ingest API is served; its paths in [`crate::permissions::TABLE`] start with it.
pub const INGEST_PREFIX: &str = "/ingest/api/v1";

/// The ingest API's routes, each with its row in [`crate::permissions::TABLE`] (full paths).
pub fn routes() -> Router<ApiState> {
    let source = "/ingest/api/v1/source/{source_id}";
    let endpoint = "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}";
    Router::new()
        .route(
            "/ingest/api/v1/source",
            get(source::list).post(source::create),
        )
        .route(
            source,
            get(source::fetch)
                .put(source::upsert)
                .delete(source::remove),
        )
        .route(
            "/ingest/api/v1/source/{source_id}/token/rotate",
            post(source::rotate_token),
        )
        .route(
            "/ingest/api/v1/source/{source_id}/dashboard",
            post(source::dashboard),
        )
        .route(
            "/ingest/api/v1/source/{source_id}/request",
            get(records::requests),
        )
        .route(
            "/ingest/api/v1/source/{source_id}/rejection",
            get(records::rejections),
        )
        .route(
            "/ingest/api/v1/source/{source_id}/endpoint",
            get(endpoint::list).post(endpoint::create),
        )
        .route(
            endpoint,
            get(endpoint::fetch)
                .put(endpoint::upsert)
                .delete(endpoint::remove),
        )
        .route(
            "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/secret",
            get(endpoint::get_secret),
        )
        .route(
            "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/secret/rotate",
            post(endpoint::rotate_secret),
        )
        .route(
            "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/headers",
            get(endpoint::get_headers)
                .put(endpoint::replace_headers)
                .patch(endpoint::patch_headers),
        )
}

/// The public route providers send to: no token but the one in the path.
pub fn receive_routes() -> Router<ApiState> {
    Router::new().route("/ingest/in/{token}", post(receive::receive))
}
