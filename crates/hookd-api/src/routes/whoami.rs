//! `GET /api/v1/auth/whoami` (hookd addition): what the calling token may see. A client that
//! holds only a token, such as the portal opened from an app-portal link, learns from it
//! whether it is an admin or which one application it is limited to.

use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::Serialize;

use crate::{ApiState, Principal};

pub fn routes() -> Router<ApiState> {
    Router::new().route("/auth/whoami", get(whoami))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WhoamiOut {
    /// `admin` or `app`.
    scope: &'static str,
    /// The application an `app` token is limited to.
    app_id: Option<String>,
}

async fn whoami(Extension(principal): Extension<Principal>) -> Json<WhoamiOut> {
    Json(match principal {
        Principal::Admin => WhoamiOut {
            scope: "admin",
            app_id: None,
        },
        Principal::App(app) => WhoamiOut {
            scope: "app",
            app_id: Some(app.to_string()),
        },
    })
}
