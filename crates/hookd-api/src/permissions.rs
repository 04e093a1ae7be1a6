//! The permission table: every authenticated route (method and path template, as routed) and
//! which kinds of token may use it. [`crate::auth::authenticate`] looks every request up here
//! by axum's [`axum::extract::MatchedPath`] and its method before any handler runs; a route
//! without a row is refused to every token, so a route added without deciding who may use it
//! is closed, never open. `docs/permissions.md` is rendered from this table ([`markdown`]) and a
//! test keeps the two equal.
//!
//! Two kinds of caller, as in Svix's server (`core/permissions.rs`):
//! - the provider: admin tokens, which run hookd for all customers;
//! - a customer: an app-scoped token (`/auth/token` with `appId`, or `hookd token create --app`)
//!   or a portal token (`/auth/app-portal-access`, the same with an expiry), limited to its
//!   own application. Another application's things answer exactly as missing ones (404), so a
//!   customer's token cannot learn what exists; that scoping is the handlers'
//!   ([`crate::ApiState::app`]), since it needs the resource.
//!
//! Either kind may be read-only: then only rows that merely read ([`Effect::Reads`]) are open
//! to it, and neither secrets nor changes. Where Svix's server has the route, the row follows
//! its permission; where hookd adds one, the row's reason says why it is the provider's or
//! also the customer's.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::LazyLock;

use axum::http::Method;

use Effect::{Changes, EndsOwnToken, Reads, ShowsSecret};
use Who::{Customer, Provider};

use crate::auth::{Caller, Principal};

/// Who a route is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// Admin tokens only: it acts for every customer, or speaks in the provider's name.
    Provider,
    /// Admin tokens, and customers' tokens on their own application.
    Customer,
}

/// What a route does to what it names: whether a read-only token may use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Only reads.
    Reads,
    /// Shows a signing secret: not to read-only tokens.
    ShowsSecret,
    /// Creates, changes, deletes or sends something.
    Changes,
    /// Revokes the calling token itself: open to read-only tokens, since it only takes access
    /// away.
    EndsOwnToken,
}

/// A kind of token, as the table tells them apart. Portal tokens are app-scoped tokens with an
/// expiry, so they are [`TokenKind::App`] or [`TokenKind::ReadOnlyApp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    Admin,
    ReadOnlyAdmin,
    App,
    ReadOnlyApp,
}

impl TokenKind {
    pub const ALL: [Self; 4] = [
        Self::Admin,
        Self::ReadOnlyAdmin,
        Self::App,
        Self::ReadOnlyApp,
    ];

    /// The kind of the token behind `caller`.
    pub fn of(caller: &Caller) -> Self {
        match (&caller.principal, caller.read_only) {
            (Principal::Admin, false) => Self::Admin,
            (Principal::Admin, true) => Self::ReadOnlyAdmin,
            (Principal::App(_), false) => Self::App,
            (Principal::App(_), true) => Self::ReadOnlyApp,
        }
    }

    /// The column heading of the kind in `docs/permissions.md`.
    pub fn heading(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::ReadOnlyAdmin => "read-only admin",
            Self::App => "app / portal",
            Self::ReadOnlyApp => "read-only app / portal",
        }
    }

    fn read_only(self) -> bool {
        matches!(self, Self::ReadOnlyAdmin | Self::ReadOnlyApp)
    }

    fn customer(self) -> bool {
        matches!(self, Self::App | Self::ReadOnlyApp)
    }
}

/// One route and who may use it.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE` (`HEAD` is looked up as `GET`).
    pub method: &'static str,
    /// The path template as routed, less its `/api/v1`: `/app/{app_id}/msg` (the ingest API's
    /// in full: `/ingest/api/v1/source`).
    pub path: &'static str,
    pub who: Who,
    pub effect: Effect,
    /// Why: Svix's permission where Svix has the route, hookd's reason where it does not.
    pub why: &'static str,
}

impl Rule {
    /// Whether a token of `kind` may use the route.
    pub fn allows(&self, kind: TokenKind) -> bool {
        let scope = self.who == Who::Customer || !kind.customer();
        let writes = matches!(self.effect, Effect::ShowsSecret | Effect::Changes);
        scope && !(kind.read_only() && writes)
    }
}

const fn rule(
    method: &'static str,
    path: &'static str,
    who: Who,
    effect: Effect,
    why: &'static str,
) -> Rule {
    Rule {
        method,
        path,
        who,
        effect,
        why,
    }
}

const SVIX_PROVIDER: &str = "Svix: organization only";
const SVIX_CUSTOMER: &str = "Svix: application tokens too";
const ENDPOINTS: &str = "Svix: application tokens manage their application's endpoints";
const DESTINATIONS: &str = "Svix: application tokens manage their application's destinations";
const OPERATIONAL: &str =
    "Svix: organization only; the provider's own operational-webhook endpoints";
const CATALOG: &str = "Svix: organization only; the catalog is the provider's, for every customer";
const PAYLOAD_DELETION: &str = "Svix: organization only; deleting payloads is the provider's, \
                                who keeps them (and a leaked portal link must not erase them)";
const TOKENS: &str =
    "hookd: issuing and revoking tokens is the provider's; a customer's token never makes another";
const REPLAY: &str = "hookd: sends its own application's messages again to its own endpoint, \
                      as Svix's recover does";
const STATS: &str = "hookd: counts across every application";
const INGEST: &str = "Svix Ingest: organization only; a source holds the provider's secrets";
const INGEST_ENDPOINTS: &str = "hookd: the endpoints of the source's application, as the \
                                endpoint routes; a customer's token reaches its own source's";
const INGEST_RECORDS: &str = "hookd: what the source accepted or refused, for the portal of \
                              its application";

/// Every authenticated route and who may use it, grouped by resource as the routes are.
#[rustfmt::skip]
pub const TABLE: &[Rule] = &[
    // Applications.
    rule("GET", "/app", Provider, Reads, "Svix: organization only; lists every customer"),
    rule("POST", "/app", Provider, Changes, SVIX_PROVIDER),
    rule("GET", "/app/{app_id}", Customer, Reads, SVIX_CUSTOMER),
    rule("PUT", "/app/{app_id}", Provider, Changes,
        "Svix: organization only; a customer changing its uid would take over the uid of a \
         customer the provider creates later"),
    rule("PATCH", "/app/{app_id}", Provider, Changes,
        "Svix: organization only; as PUT (the uid, the throttle rate)"),
    rule("DELETE", "/app/{app_id}", Provider, Changes, SVIX_PROVIDER),
    // Endpoints.
    rule("GET", "/app/{app_id}/endpoint", Customer, Reads, ENDPOINTS),
    rule("POST", "/app/{app_id}/endpoint", Customer, Changes,
        "Svix: application tokens too; at most --max-endpoints-per-app"),
    rule("GET", "/app/{app_id}/endpoint/{endpoint_id}", Customer, Reads, ENDPOINTS),
    rule("PUT", "/app/{app_id}/endpoint/{endpoint_id}", Customer, Changes, ENDPOINTS),
    rule("PATCH", "/app/{app_id}/endpoint/{endpoint_id}", Customer, Changes, ENDPOINTS),
    rule("DELETE", "/app/{app_id}/endpoint/{endpoint_id}", Customer, Changes, ENDPOINTS),
    rule("GET", "/app/{app_id}/endpoint/{endpoint_id}/secret", Customer, ShowsSecret,
        "Svix: application tokens too; the customer verifies signatures with it"),
    rule("POST", "/app/{app_id}/endpoint/{endpoint_id}/secret/rotate", Customer, Changes,
        ENDPOINTS),
    rule("GET", "/app/{app_id}/endpoint/{endpoint_id}/headers", Customer, Reads, ENDPOINTS),
    rule("PUT", "/app/{app_id}/endpoint/{endpoint_id}/headers", Customer, Changes, ENDPOINTS),
    rule("PATCH", "/app/{app_id}/endpoint/{endpoint_id}/headers", Customer, Changes, ENDPOINTS),
    rule("GET", "/app/{app_id}/endpoint/{endpoint_id}/stats", Customer, Reads, SVIX_CUSTOMER),
    rule("POST", "/app/{app_id}/endpoint/{endpoint_id}/recover", Customer, Changes,
        SVIX_CUSTOMER),
    rule("GET", "/app/{app_id}/endpoint/{endpoint_id}/health", Customer, Reads,
        "hookd: the figures of /stats over time, for the customer's own endpoint (the \
         portal's health charts)"),
    rule("POST", "/app/{app_id}/endpoint/{endpoint_id}/send-example", Customer, Changes,
        "hookd: as Svix's app portal, whose Testing tab sends it; it sends the catalog's \
         example, never a payload of the caller's, to the customer's own endpoint, and a \
         token that may send it also reads the endpoint's secret"),
    rule("POST", "/app/{app_id}/endpoint/{endpoint_id}/replay-missing", Customer, Changes,
        REPLAY),
    rule("POST", "/app/{app_id}/endpoint/{endpoint_id}/bulk-replay", Customer, Changes, REPLAY),
    // Destinations: endpoints of other kinds, managed like endpoints.
    rule("GET", "/app/{app_id}/destination", Customer, Reads, DESTINATIONS),
    rule("POST", "/app/{app_id}/destination", Customer, Changes,
        "Svix: application tokens too; counted with endpoints against --max-endpoints-per-app"),
    rule("GET", "/app/{app_id}/destination/{destination_id}", Customer, Reads, DESTINATIONS),
    rule("PUT", "/app/{app_id}/destination/{destination_id}", Customer, Changes, DESTINATIONS),
    rule("PATCH", "/app/{app_id}/destination/{destination_id}", Customer, Changes,
        DESTINATIONS),
    rule("DELETE", "/app/{app_id}/destination/{destination_id}", Customer, Changes,
        DESTINATIONS),
    rule("GET", "/app/{app_id}/destination/{destination_id}/secret", Customer, ShowsSecret,
        "hookd: application tokens too; the customer verifies signatures with it"),
    rule("POST", "/app/{app_id}/destination/{destination_id}/secret/rotate", Customer,
        Changes, DESTINATIONS),
    rule("GET", "/app/{app_id}/poller/{sink_id}", Customer, Reads,
        "Svix: application tokens too; the customer reads its own polling destination"),
    rule("GET", "/app/{app_id}/poller/{sink_id}/consumer/{consumer_id}", Customer, Changes,
        "Svix: application tokens too; a read that moves the consumer's kept position"),
    rule("POST", "/app/{app_id}/poller/{sink_id}/consumer/{consumer_id}/seek", Customer,
        Changes, "Svix: application tokens too; moves the consumer's kept position"),
    rule("POST", "/auth/app/{app_id}/destination/{sink_id}/poller/token/rotate", Customer,
        Changes, "hookd: issues a token narrower than the caller's: one destination's poller"),
    // Operational-webhook endpoints.
    rule("GET", "/operational-webhook/endpoint", Provider, Reads, OPERATIONAL),
    rule("POST", "/operational-webhook/endpoint", Provider, Changes, OPERATIONAL),
    rule("GET", "/operational-webhook/endpoint/{endpoint_id}", Provider, Reads, OPERATIONAL),
    rule("PUT", "/operational-webhook/endpoint/{endpoint_id}", Provider, Changes, OPERATIONAL),
    rule("DELETE", "/operational-webhook/endpoint/{endpoint_id}", Provider, Changes,
        OPERATIONAL),
    rule("GET", "/operational-webhook/endpoint/{endpoint_id}/secret", Provider, ShowsSecret,
        OPERATIONAL),
    rule("POST", "/operational-webhook/endpoint/{endpoint_id}/secret/rotate", Provider, Changes,
        OPERATIONAL),
    rule("GET", "/operational-webhook/endpoint/{endpoint_id}/headers", Provider, Reads,
        OPERATIONAL),
    rule("PUT", "/operational-webhook/endpoint/{endpoint_id}/headers", Provider, Changes,
        OPERATIONAL),
    // Messages.
    rule("GET", "/app/{app_id}/msg", Customer, Reads, SVIX_CUSTOMER),
    rule("POST", "/app/{app_id}/msg", Provider, Changes,
        "Svix: organization only; a customer's token (a leaked portal link) must not send \
         correctly signed events in the provider's name"),
    rule("POST", "/app/{app_id}/msg/precheck/active", Provider, Reads,
        "hookd: a producer's question before publishing; customers see their endpoints"),
    rule("GET", "/app/{app_id}/msg/{msg_id}", Customer, Reads, SVIX_CUSTOMER),
    rule("DELETE", "/app/{app_id}/msg/{msg_id}/content", Provider, Changes, PAYLOAD_DELETION),
    rule("POST", "/app/{app_id}/msg/expunge-all-contents", Provider, Changes, PAYLOAD_DELETION),
    // Attempts and redelivery.
    rule("GET", "/app/{app_id}/attempt/msg/{msg_id}", Customer, Reads, SVIX_CUSTOMER),
    rule("GET", "/app/{app_id}/attempt/endpoint/{endpoint_id}", Customer, Reads, SVIX_CUSTOMER),
    rule("GET", "/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}", Customer, Reads,
        SVIX_CUSTOMER),
    rule("DELETE", "/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}/content", Provider, Changes,
        PAYLOAD_DELETION),
    rule("GET", "/app/{app_id}/msg/{msg_id}/endpoint", Customer, Reads, SVIX_CUSTOMER),
    rule("GET", "/app/{app_id}/endpoint/{endpoint_id}/msg", Customer, Reads, SVIX_CUSTOMER),
    rule("POST", "/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/resend", Customer, Changes,
        SVIX_CUSTOMER),
    rule("POST", "/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/skip", Customer, Changes,
        "hookd: gives up one delivery to the customer's own endpoint, so the next of its \
         ordering key goes"),
    // Background tasks and statistics.
    rule("GET", "/background-task", Customer, Reads,
        "hookd: a customer's token lists its own application's tasks only"),
    rule("GET", "/background-task/{task_id}", Customer, Reads,
        "hookd: another application's task answers as a missing one"),
    rule("POST", "/stats/usage/app", Provider, Changes, STATS),
    rule("PUT", "/stats/usage/event-types", Provider, Changes, STATS),
    // The event catalog.
    rule("GET", "/event-type", Customer, Reads,
        "Svix: any token reads the catalog, to subscribe to it"),
    rule("POST", "/event-type", Provider, Changes, CATALOG),
    rule("POST", "/event-type/import/openapi", Provider, Changes, CATALOG),
    rule("GET", "/event-type/{event_type_name}", Customer, Reads,
        "Svix: any token reads the catalog, to subscribe to it"),
    rule("PUT", "/event-type/{event_type_name}", Provider, Changes, CATALOG),
    rule("PATCH", "/event-type/{event_type_name}", Provider, Changes, CATALOG),
    rule("DELETE", "/event-type/{event_type_name}", Provider, Changes, CATALOG),
    // Tokens and access.
    rule("GET", "/auth/token", Provider, Reads, TOKENS),
    rule("POST", "/auth/token", Provider, Changes, TOKENS),
    rule("DELETE", "/auth/token/{token_id}", Provider, Changes, TOKENS),
    rule("POST", "/auth/app-portal-access/{app_id}", Provider, Changes, SVIX_PROVIDER),
    rule("POST", "/auth/logout", Customer, EndsOwnToken,
        "Svix: a token logs itself out, and only itself"),
    rule("GET", "/auth/whoami", Customer, Reads,
        "hookd: tells a token its own scope (the portal asks it)"),
    // The ingest gateway (paths under /ingest/api/v1): sources are the provider's; their
    // forwarding targets and records are also the customer's of the source's portal link.
    rule("GET", "/ingest/api/v1/source", Provider, Reads, INGEST),
    rule("POST", "/ingest/api/v1/source", Provider, Changes, INGEST),
    rule("GET", "/ingest/api/v1/source/{source_id}", Provider, Reads, INGEST),
    rule("PUT", "/ingest/api/v1/source/{source_id}", Provider, Changes, INGEST),
    rule("DELETE", "/ingest/api/v1/source/{source_id}", Provider, Changes, INGEST),
    rule("POST", "/ingest/api/v1/source/{source_id}/token/rotate", Provider, Changes, INGEST),
    rule("POST", "/ingest/api/v1/source/{source_id}/dashboard", Provider, Changes,
        "Svix: organization only; issues a portal token for the source's application"),
    rule("GET", "/ingest/api/v1/source/{source_id}/request", Customer, Reads, INGEST_RECORDS),
    rule("GET", "/ingest/api/v1/source/{source_id}/rejection", Customer, Reads,
        INGEST_RECORDS),
    rule("GET", "/ingest/api/v1/source/{source_id}/endpoint", Customer, Reads, INGEST_ENDPOINTS),
    rule("POST", "/ingest/api/v1/source/{source_id}/endpoint", Customer, Changes,
        INGEST_ENDPOINTS),
    rule("GET", "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}", Customer, Reads,
        INGEST_ENDPOINTS),
    rule("PUT", "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}", Customer, Changes,
        INGEST_ENDPOINTS),
    rule("DELETE", "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}", Customer,
        Changes, INGEST_ENDPOINTS),
    rule("GET", "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/secret", Customer,
        ShowsSecret, INGEST_ENDPOINTS),
    rule("POST", "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/secret/rotate",
        Customer, Changes, INGEST_ENDPOINTS),
    rule("GET", "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/headers", Customer,
        Reads, INGEST_ENDPOINTS),
    rule("PUT", "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/headers", Customer,
        Changes, INGEST_ENDPOINTS),
    rule("PATCH", "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/headers", Customer,
        Changes, INGEST_ENDPOINTS),
];
/// The row of a request, by its method and matched path template (under `/api/v1`).
pub fn lookup(method: &Method, path: &str) -> Option<&'static Rule> {
    /// The rows by path, then method: every request looks its row up.
    static BY_PATH: LazyLock<HashMap<&str, Vec<&Rule>>> = LazyLock::new(|| {
        let mut by_path: HashMap<&str, Vec<&Rule>> = HashMap::new();
        for rule in TABLE {
            by_path.entry(rule.path).or_default().push(rule);
        }
        by_path
    });
    let method = if *method == Method::HEAD {
        "GET"
    } else {
        method.as_str()
    };
    BY_PATH
        .get(path)?
        .iter()
        .find(|rule| rule.method == method)
        .copied()
}

/// Whether any row has `path`, whatever its method: a request with another method is one the
/// router does not route.
pub fn has_path(path: &str) -> bool {
    TABLE.iter().any(|rule| rule.path == path)
}

/// The table as the Markdown table of `docs/permissions.md`.
pub fn markdown() -> String {
    let mut out = String::from("| Method | Path |");
    for kind in TokenKind::ALL {
        let _ = write!(out, " {} |", kind.heading());
    }
    out.push_str(" Why |\n|---|---|");
    out.push_str(&"---|".repeat(TokenKind::ALL.len()));
    out.push_str("---|\n");
    for rule in TABLE {
        let _ = write!(out, "| {} | `{}` |", rule.method, rule.path);
        for kind in TokenKind::ALL {
            out.push_str(if rule.allows(kind) { " yes |" } else { " no |" });
        }
        let _ = writeln!(out, " {} |", rule.why);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use axum::Router;
    use axum::body::Body;
    use axum::extract::{MatchedPath, Request};
    use axum::http::header::ALLOW;
    use axum::http::{HeaderValue, StatusCode};
    use axum::middleware::{Next, from_fn};
    use axum::response::Response;
    use axum::routing::get;
    use hookd_core::SystemClock;
    use serde_json::Value;
    use tempfile::TempDir;
    use tower::ServiceExt;

    use super::*;
    use crate::routes::health::OPENAPI;
    use crate::{ApiConfig, ApiState, auth, token_hash};

    const TOKEN: &str = "permissions-unit-test-token";

    async fn state() -> (ApiState, TempDir) {
        let (store, dir) = hookd_store::testing::sqlite_store().await;
        let config = ApiConfig {
            configured_admin_token_hashes: vec![token_hash(TOKEN)],
            ..ApiConfig::default()
        };
        let state = ApiState::new(
            Arc::new(store),
            Arc::new(SystemClock),
            config,
            Arc::default(),
        );
        (state, dir)
    }

    /// The path templates `router` has routes for, as its `Debug` output lists them (axum has
    /// no other way to list them). Should a later axum print them otherwise, the callers'
    /// comparisons fail rather than pass.
    fn templates<S>(router: &Router<S>) -> BTreeSet<String> {
        let debug = format!("{router:?}");
        // The routes' own paths come first; the fallback's (`/`, a catch-all) after these.
        let (routes, _fallback) = debug.split_once("fallback_router").unwrap();
        routes
            .split("RouteId(")
            .skip(1)
            .filter_map(|after| after.split_once('"'))
            .filter(|(head, _)| head.ends_with("): "))
            .filter_map(|(_, rest)| rest.split_once('"').map(|(path, _)| path.to_owned()))
            .collect()
    }

    /// Names the template a request was routed to, in a response header.
    async fn routed_to(request: Request, next: Next) -> Response {
        let template = request.extensions().get::<MatchedPath>().unwrap().clone();
        let mut response = next.run(request).await;
        let value = HeaderValue::from_str(template.as_str()).unwrap();
        response.headers_mut().insert("x-template", value);
        response
    }

    /// Every (method, template) the authenticated routes answer, asked of the router itself:
    /// a request with a method no route has reaches no handler, and the router answers it
    /// 405 with the methods the path is routed for (`Allow`).
    async fn routed() -> BTreeSet<(String, String)> {
        let routes = crate::authenticated_routes().merge(crate::routes::ingest::routes());
        let paths = templates(&routes);
        assert!(paths.len() > 40, "axum's Debug listed only {paths:?}");
        let (state, _dir) = state().await;
        let probe = routes.layer(from_fn(routed_to)).with_state(state);
        let mut found = BTreeSet::new();
        for template in paths {
            let concrete = template.replace(['{', '}'], "");
            let request = Request::builder()
                .method(Method::from_bytes(b"PROBE").unwrap())
                .uri(&concrete)
                .body(Body::empty())
                .unwrap();
            let response = probe.clone().oneshot(request).await.unwrap();
            assert_eq!(
                response.status(),
                StatusCode::METHOD_NOT_ALLOWED,
                "{concrete}"
            );
            assert_eq!(response.headers()["x-template"], template.as_str());
            let allow = response.headers()[ALLOW].to_str().unwrap();
            let row_path = template
                .strip_prefix(crate::API_PREFIX)
                .unwrap_or(&template);
            for method in allow.split(',').map(str::trim).filter(|m| *m != "HEAD") {
                found.insert((method.to_owned(), row_path.to_owned()));
            }
        }
        found
    }

    fn rows() -> BTreeSet<(String, String)> {
        TABLE
            .iter()
            .map(|rule| (rule.method.to_owned(), rule.path.to_owned()))
            .collect()
    }

    #[tokio::test]
    async fn every_routed_route_has_exactly_one_row_and_every_row_is_routed() {
        let routed = routed().await;
        let rows = rows();
        assert_eq!(rows.len(), TABLE.len(), "a route has two rows");
        let unlisted: Vec<_> = routed.difference(&rows).collect();
        assert!(
            unlisted.is_empty(),
            "routes without a row in TABLE: {unlisted:?}"
        );
        let unrouted: Vec<_> = rows.difference(&routed).collect();
        assert!(unrouted.is_empty(), "rows of no route: {unrouted:?}");
    }

    #[test]
    fn every_operation_of_the_openapi_document_has_a_row_and_none_more() {
        let document: Value = serde_json::from_str(OPENAPI).unwrap();
        let open = templates(&crate::routes::health::routes());
        let mut documented = BTreeSet::new();
        for (path, operations) in document["paths"].as_object().unwrap() {
            let open = open.contains(path);
            let path = path.strip_prefix(crate::API_PREFIX).unwrap_or(path);
            for method in operations.as_object().unwrap().keys() {
                if !open {
                    documented.insert((method.to_uppercase(), path.to_owned()));
                }
            }
        }
        assert_eq!(documented, rows());
    }

    #[tokio::test]
    async fn a_route_without_a_row_is_refused_even_to_an_admin() {
        let (state, _dir) = state().await;
        let app = Router::new()
            .route("/auth/whoami", get(|| async { "listed" }))
            .route("/unlisted", get(|| async { "unlisted" }))
            .layer(auth::Authenticate::new(state.clone()))
            .with_state(state);
        let status = |path: &str| {
            let request = Request::builder()
                .uri(path)
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(Body::empty())
                .unwrap();
            let app = app.clone();
            async move { app.oneshot(request).await.unwrap().status() }
        };
        assert_eq!(status("/auth/whoami").await, StatusCode::OK);
        assert_eq!(status("/unlisted").await, StatusCode::FORBIDDEN);
    }

    #[test]
    fn the_kinds_of_token_get_what_their_columns_say() {
        let publish = lookup(&Method::POST, "/app/{app_id}/msg").unwrap();
        let allowed = |rule: &Rule| TokenKind::ALL.map(|kind| rule.allows(kind));
        assert_eq!(allowed(publish), [true, false, false, false]);
        let secret = lookup(&Method::GET, "/app/{app_id}/endpoint/{endpoint_id}/secret").unwrap();
        assert_eq!(allowed(secret), [true, false, true, false]);
        let read = lookup(&Method::HEAD, "/app/{app_id}/msg").unwrap();
        assert_eq!(allowed(read), [true; 4]);
        let logout = lookup(&Method::POST, "/auth/logout").unwrap();
        assert_eq!(allowed(logout), [true; 4]);
        let tokens = lookup(&Method::GET, "/auth/token").unwrap();
        assert_eq!(allowed(tokens), [true, true, false, false]);
    }

    #[test]
    fn docs_permissions_md_shows_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/permissions.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (_, rest) = doc.split_once("<!-- permissions:begin -->\n").unwrap();
        let (shown, _) = rest.split_once("<!-- permissions:end -->").unwrap();
        assert!(
            shown == markdown(),
            "docs/permissions.md differs from permissions::TABLE; its table should read:\n{}",
            markdown()
        );
    }
}
