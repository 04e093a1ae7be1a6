//! The delivery log portal: the pages support staff and customers use to answer "did you send
//! it?", served by `hookd serve` under `/portal`.
//!
//! The pages are static: HTML, CSS and a little plain JavaScript compiled into the binary
//! (no build step, nothing from a CDN). In the browser they call hookd's own API with the
//! token the visitor signed in with, so every view and every action passes the same
//! authentication and application scoping as any API client, and this crate needs no access to
//! the store. An app-scoped token (an app-portal link, `/portal/login#token=…`) opens one
//! application only, because the API answers it for no other.
//!
//! # Layout
//! - this file: [`router`], which serves the page and its assets with headers that keep them
//!   from being sniffed, cached stale or leaking the address.
//! - `assets/index.html`, `assets/portal.css`, `assets/portal.js`: the portal itself: sign-in,
//!   routing, the applications, messages, attempts and destinations.
//! - `assets/health.js`: delivery health at a glance, SVG charts drawn in the page.
//! - `assets/endpoint-edit.js`: the pages and actions a customer looks after its endpoints with.
//! - `assets/ingest.js`: the ingest gateway's pages (sources, what each accepted, refused and
//!   forwarded), on portal.js's helpers and router.

use axum::Router;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderName, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/portal.js");
const INGEST_SCRIPT: &str = include_str!("../assets/ingest.js");
const STYLE: &str = include_str!("../assets/portal.css");
const HEALTH: &str = include_str!("../assets/health.js");
const ENDPOINT_EDIT: &str = include_str!("../assets/endpoint-edit.js");

/// Scripts and styles only from the portal itself, API calls only to this origin. Framing is
/// allowed: an app-portal link is meant to be embedded in the producer's own dashboard, and
/// the token lives in the frame's own session storage, so a frame grants no ambient access.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'";

/// The portal's routes, to be merged at the root of hookd's router (they all live under
/// `/portal`).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/portal", get(|| async { Redirect::permanent("/portal/") }))
        .route("/portal/", get(|| async { page() }))
        .route("/portal/login", get(|| async { page() }))
        .route(
            "/portal/assets/portal.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/portal/assets/health.js",
            get(|| async { asset("text/javascript; charset=utf-8", HEALTH) }),
        )
        .route(
            "/portal/assets/endpoint-edit.js",
            get(|| async { asset("text/javascript; charset=utf-8", ENDPOINT_EDIT) }),
        )
        .route(
            "/portal/assets/ingest.js",
            get(|| async { asset("text/javascript; charset=utf-8", INGEST_SCRIPT) }),
        )
        .route(
            "/portal/assets/portal.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
        .route(
            "/portal/{*rest}",
            get(|| async { (StatusCode::NOT_FOUND, "no such portal page") }),
        )
}

fn page() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

/// `body` with its type and the portal's security headers. `no-cache` makes browsers
/// revalidate, so a hookd upgrade never runs old script against a new API.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers: [(HeaderName, &'static str); 5] = [
        (CONTENT_TYPE, content_type),
        (CACHE_CONTROL, "no-cache"),
        (CONTENT_SECURITY_POLICY, POLICY),
        (REFERRER_POLICY, "no-referrer"),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    let mut response = body.into_response();
    for (name, value) in headers {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get(path: &str) -> Response {
        router::<()>()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_page_and_its_assets_are_served_with_a_strict_policy() {
        for (path, kind) in [
            ("/portal/", "text/html"),
            ("/portal/login", "text/html"),
            ("/portal/assets/portal.js", "text/javascript"),
            ("/portal/assets/health.js", "text/javascript"),
            ("/portal/assets/endpoint-edit.js", "text/javascript"),
            ("/portal/assets/ingest.js", "text/javascript"),
            ("/portal/assets/portal.css", "text/css"),
        ] {
            let response = get(path).await;
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            let header = |name| response.headers()[name].to_str().unwrap().to_owned();
            assert!(header(CONTENT_TYPE).starts_with(kind), "{path}");
            assert!(header(CONTENT_SECURITY_POLICY).contains("script-src 'self'"));
            assert_eq!(header(REFERRER_POLICY), "no-referrer");
        }
    }

    #[tokio::test]
    async fn the_bare_prefix_redirects_and_unknown_pages_are_not_found() {
        let response = get("/portal").await;
        assert_eq!(response.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(response.headers()["location"], "/portal/");
        assert_eq!(get("/portal/nope").await.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for asset in [INDEX, SCRIPT, STYLE, HEALTH, ENDPOINT_EDIT, INGEST_SCRIPT] {
            // The SVG namespace is a name, never fetched.
            let asset = asset.replace("'http://www.w3.org/2000/svg'", "");
            assert!(!asset.contains("http://") && !asset.contains("https://"));
        }
        assert!(
            !INDEX.contains("<script>"),
            "no inline script: the policy forbids it"
        );
    }
}
