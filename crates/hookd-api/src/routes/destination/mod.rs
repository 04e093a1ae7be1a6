//! `/api/v1/app/{app}/destination` and `/api/v1/app/{app}/poller`: an application's
//! destinations beyond HTTP endpoints, in Svix's shape, and the polling destinations' pollers.
//!
//! A destination is an endpoint of another kind ([`Destination`]), so it has what an endpoint
//! has (filters, signing keys, the operational webhooks, the limit per application); the
//! endpoint routes never show one, and these never show an HTTP endpoint.
//!
//! # Layout
//! - `crud`: list, create, read, replace (PUT), patch and delete a destination; read and
//!   rotate its signing secret.
//! - `models`: the request and response bodies and how a body becomes or changes a
//!   destination.
//! - `config`: each type's `config`: checked, split into clear and sealed parts, shown back
//!   without credentials.
//! - `poller`: a polling destination's messages read by a poller or a named consumer whose
//!   position the server keeps, a consumer's seek, and the poller tokens that may do only
//!   that.

mod config;
mod crud;
mod models;
mod poller;

use axum::Router;
use axum::routing::{get, post};
use hookd_core::destination::Destination;
use hookd_core::model::Endpoint;

pub use models::DestinationOut;

use crate::routes::endpoint::find_where;
use crate::{ApiError, ApiState, Principal};

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(
            v1!("/app/{app_id}/destination"),
            get(crud::list).post(crud::create),
        )
        .route(
            v1!("/app/{app_id}/destination/{destination_id}"),
            get(crud::fetch)
                .put(crud::upsert)
                .patch(crud::patch)
                .delete(crud::remove),
        )
        .route(
            v1!("/app/{app_id}/destination/{destination_id}/secret"),
            get(crud::secret),
        )
        .route(
            v1!("/app/{app_id}/destination/{destination_id}/secret/rotate"),
            post(crud::rotate_secret),
        )
        .route(v1!("/app/{app_id}/poller/{sink_id}"), get(poller::poll))
        .route(
            v1!("/app/{app_id}/poller/{sink_id}/consumer/{consumer_id}"),
            get(poller::consumer_poll),
        )
        .route(
            v1!("/app/{app_id}/poller/{sink_id}/consumer/{consumer_id}/seek"),
            post(poller::consumer_seek),
        )
        .route(
            v1!("/auth/app/{app_id}/destination/{sink_id}/poller/token/rotate"),
            post(poller::rotate_token),
        )
}

/// The destination of an application visible to `principal`, by id or uid.
pub(crate) async fn find(
    state: &ApiState,
    principal: &Principal,
    app_id: &str,
    destination_id: &str,
) -> Result<Endpoint, ApiError> {
    let destination = |d: &Destination| *d != Destination::Http;
    find_where(
        state,
        principal,
        app_id,
        destination_id,
        destination,
        "destination",
    )
    .await
}
