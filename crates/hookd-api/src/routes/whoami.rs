//! `GET /api/v1/auth/whoami` (hookd addition): what the calling token may see and do. A client
//! that holds only a token, such as the portal opened from an app-portal link, learns from it
//! whether it is an admin or which one application it is limited to, and whether it may only
//! read (so the portal offers no change it would be refused).

use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::Serialize;

use crate::ApiState;
use crate::auth::{Caller, Principal};

pub fn routes() -> Router<ApiState> {
    Router::new().route(v1!("/auth/whoami"), get(whoami))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WhoamiOut {
    /// `admin` or `app`.
    scope: &'static str,
    /// The application an `app` token is limited to.
    app_id: Option<String>,
    /// The token may only read: no changes, no secrets.
    read_only: bool,
}

async fn whoami(Extension(caller): Extension<Caller>) -> Json<WhoamiOut> {
    let (scope, app_id) = match &caller.principal {
        Principal::Admin => ("admin", None),
        Principal::App(app) => ("app", Some(app.to_string())),
    };
    Json(WhoamiOut {
        scope,
        app_id,
        read_only: caller.read_only,
    })
}
