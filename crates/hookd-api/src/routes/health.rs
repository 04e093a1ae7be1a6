//! Health and the API's own OpenAPI document: the routes that need no token.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::{ApiError, ApiState};

/// hookd's OpenAPI document: Svix's v1 paths that hookd serves, plus hookd's additions.
pub const OPENAPI: &str = include_str!("../../openapi.json");

pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(v1!("/health"), get(health))
        .route(v1!("/health/ping"), get(ping))
        .route(v1!("/openapi.json"), get(openapi))
}

/// 204 when the database answers, 503 when it does not.
async fn health(State(state): State<ApiState>) -> Result<StatusCode, ApiError> {
    state.store().has_admin_token().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// 204 while the process serves requests, whatever the database's state.
async fn ping() -> StatusCode {
    StatusCode::NO_CONTENT
}

async fn openapi() -> impl IntoResponse {
    ([(CONTENT_TYPE, "application/json")], OPENAPI)
}
