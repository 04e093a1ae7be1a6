//! Promise: a token does what `docs/permissions.md` says its kind may do, and nothing more, on
//! the real binary. The table is hookd's own (`hookd_api::permissions::TABLE`): every row is
//! requested with every kind of token (admin, read-only admin, app-scoped, read-only
//! app-scoped, portal, read-only portal), so a route added to the table is checked here at
//! once. A customer's token on another customer's things gets exactly what a missing id gets.
//! The findings of issue 51 each have their own test: the uid take-over, publishing and
//! payload deletion with a customer's token, and the limit on endpoints per application (on
//! SQLite and, with `HOOKD_TEST_POSTGRES_URL`, PostgreSQL).

mod support;

use hookd_api::permissions::{Effect, Rule, TABLE, TokenKind};
use hookd_store::testing::{fresh_postgres, fresh_sqlite};
use reqwest::Method;
use serde_json::{Value, json};
use support::{Api, Hookd, closed_port, eventually};

const ADMIN: &str = "permissions-test-admin-token";
/// Where the ingest API's paths start.
const INGEST: &str = "/ingest/api/v1";

/// A token's way into hookd's API.
#[derive(Clone)]
struct Client(Api);

impl Client {
    fn new(hookd: &Hookd, token: &str) -> Self {
        Self(Api::new(hookd, token))
    }

    fn with_token(&self, token: &str) -> Self {
        Self(self.0.with_token(token))
    }

    /// The status and JSON answer (`null` without a body) of `method path` with `body`; the
    /// ingest API's paths are full, the others under `/api/v1`.
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        match path.starts_with(INGEST) {
            true => self.0.at_root().call(method, path, body, &[]).await,
            false => self.0.call(method, path, body, &[]).await,
        }
    }

    /// POSTs `body` to `path`, asserting `status`; the answer.
    async fn made(&self, path: &str, body: Value, status: u16) -> Value {
        let (got, out) = self.call(Method::POST, path, Some(body)).await;
        assert_eq!(got, status, "POST {path}: {out}");
        out
    }

    async fn get(&self, path: &str) -> Value {
        let (status, out) = self.call(Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {out}");
        out
    }
}

/// The kinds of token hookd issues, how each is made, and the table's column for it.
#[derive(Clone, Copy, Debug)]
enum Issued {
    ConfiguredAdmin,
    ReadOnlyAdmin,
    App,
    ReadOnlyApp,
    Portal,
    ReadOnlyPortal,
}

impl Issued {
    const ALL: [Self; 6] = [
        Self::ConfiguredAdmin,
        Self::ReadOnlyAdmin,
        Self::App,
        Self::ReadOnlyApp,
        Self::Portal,
        Self::ReadOnlyPortal,
    ];

    fn kind(self) -> TokenKind {
        match self {
            Self::ConfiguredAdmin => TokenKind::Admin,
            Self::ReadOnlyAdmin => TokenKind::ReadOnlyAdmin,
            Self::App | Self::Portal => TokenKind::App,
            Self::ReadOnlyApp | Self::ReadOnlyPortal => TokenKind::ReadOnlyApp,
        }
    }

    /// A new token of this kind, scoped to `app` when it is a customer's; a stored admin token
    /// for [`Issued::ConfiguredAdmin`] (one that can log itself out).
    async fn issue(self, admin: &Client, app: &str) -> String {
        let made = match self {
            Self::ConfiguredAdmin => admin.made("/auth/token", json!({}), 201).await,
            Self::ReadOnlyAdmin => {
                let body = json!({"readOnly": true});
                admin.made("/auth/token", body, 201).await
            }
            Self::App => admin.made("/auth/token", json!({"appId": app}), 201).await,
            Self::ReadOnlyApp => {
                let body = json!({"appId": app, "readOnly": true});
                admin.made("/auth/token", body, 201).await
            }
            Self::Portal => {
                let path = format!("/auth/app-portal-access/{app}");
                admin.made(&path, json!({}), 200).await
            }
            Self::ReadOnlyPortal => {
                let path = format!("/auth/app-portal-access/{app}");
                admin.made(&path, json!({"readOnly": true}), 200).await
            }
        };
        made["token"].as_str().unwrap().to_owned()
    }
}

/// One of everything the table's paths name, in application `acme`, made by the admin.
struct Seeds {
    app: String,
    endpoint: String,
    destination: String,
    polling: String,
    message: String,
    attempt: String,
    task: String,
    event_type: String,
    operational_endpoint: String,
    token: String,
    /// An ingest source, its application's uid (what customers' tokens for it name) and a
    /// forwarding endpoint of it.
    source: String,
    source_app: String,
    source_endpoint: String,
}

impl Seeds {
    async fn plant(admin: &Client) -> Self {
        admin
            .made("/app", json!({"name": "Acme", "uid": "acme"}), 201)
            .await;
        let url = format!("http://{}/hook", closed_port());
        let path = "/app/acme/endpoint";
        let endpoint = admin.made(path, json!({"url": url}), 201).await;
        let endpoint = endpoint["id"].as_str().unwrap().to_owned();
        let message = publish(admin, "acme").await;
        let attempts = format!("/app/acme/attempt/msg/{message}");
        let attempt = eventually(async || {
            let listed = admin.get(&attempts).await;
            listed["data"][0]["id"]
                .as_str()
                .map(str::to_owned)
                .ok_or(format!("no attempt yet: {listed}"))
        })
        .await;
        let replay = format!("/app/acme/endpoint/{endpoint}/replay-missing");
        let body = json!({"since": "2020-01-01T00:00:00Z"});
        let task = admin.made(&replay, body, 202).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let source = fresh_source(admin).await;
        Self {
            app: "acme".into(),
            endpoint,
            destination: fresh_destination(admin).await,
            polling: {
                let body = json!({"type": "pollingEndpoint", "config": {}});
                let made = admin.made("/app/acme/destination", body, 201).await;
                made["id"].as_str().unwrap().to_owned()
            },
            message,
            attempt,
            task,
            event_type: fresh_event_type(admin).await,
            operational_endpoint: fresh_operational_endpoint(admin).await,
            token: fresh_token_id(admin).await,
            source: source.clone(),
            source_app: format!("hookd-ingest-{source}"),
            source_endpoint: fresh_source_endpoint(admin, &source).await,
        }
    }

    /// What `param` of a path of `rule` stands for here.
    fn value(&self, rule: &Rule, param: &str) -> String {
        match param {
            "app_id" => &self.app,
            "endpoint_id" if operational(rule) => &self.operational_endpoint,
            "endpoint_id" if ingest(rule) => &self.source_endpoint,
            "source_id" => &self.source,
            "endpoint_id" => &self.endpoint,
            "destination_id" => &self.destination,
            "sink_id" => &self.polling,
            "consumer_id" => return "consumer-1".to_owned(),
            "msg_id" => &self.message,
            "attempt_id" => &self.attempt,
            "task_id" => &self.task,
            "event_type_name" => &self.event_type,
            "token_id" => &self.token,
            other => panic!("no seed for {{{other}}} of {} {}", rule.method, rule.path),
        }
        .clone()
    }
}

fn operational(rule: &Rule) -> bool {
    rule.path.starts_with("/operational-webhook/")
}

fn ingest(rule: &Rule) -> bool {
    rule.path.starts_with(INGEST)
}

async fn fresh_source(admin: &Client) -> String {
    let config = json!({"secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"});
    let body = json!({"name": "Acme's Stripe", "type": "svix", "config": config});
    let made = admin.made(&format!("{INGEST}/source"), body, 201).await;
    made["id"].as_str().unwrap().to_owned()
}

async fn fresh_source_endpoint(admin: &Client, source: &str) -> String {
    let url = format!("http://{}/forward", closed_port());
    let path = format!("{INGEST}/source/{source}/endpoint");
    let made = admin.made(&path, json!({"url": url}), 201).await;
    made["id"].as_str().unwrap().to_owned()
}

async fn publish(admin: &Client, app: &str) -> String {
    let body = json!({"eventType": "order.created", "payload": {"n": 1}});
    let made = admin.made(&format!("/app/{app}/msg"), body, 202).await;
    made["id"].as_str().unwrap().to_owned()
}

/// A unique suffix for names made during the test.
fn unique() -> String {
    hookd_store::testing::random_hex()[..12].to_owned()
}

async fn fresh_event_type(admin: &Client) -> String {
    let name = format!("order.e{}", unique());
    let body = json!({"name": name, "description": "an order"});
    admin.made("/event-type", body, 201).await;
    name
}

async fn fresh_operational_endpoint(admin: &Client) -> String {
    let url = format!("http://{}/operations", closed_port());
    let made = admin
        .made("/operational-webhook/endpoint", json!({"url": url}), 201)
        .await;
    made["id"].as_str().unwrap().to_owned()
}

/// A `fifoEndpoint` destination of `acme` (the one type every destination route serves).
async fn fresh_destination(admin: &Client) -> String {
    let url = format!("http://{}/fifo", closed_port());
    let body = json!({"type": "fifoEndpoint", "config": {"url": url}});
    let made = admin.made("/app/acme/destination", body, 201).await;
    made["id"].as_str().unwrap().to_owned()
}

async fn fresh_token_id(admin: &Client) -> String {
    let made = admin
        .made("/auth/token", json!({"name": "spare"}), 201)
        .await;
    made["id"].as_str().unwrap().to_owned()
}

/// A new thing of the kind `param` names, for a request that deletes it: the path's last
/// parameter is what a DELETE removes. `None` where the shared seed may be used up.
async fn fresh(admin: &Client, seeds: &Seeds, rule: &Rule, param: &str) -> Option<String> {
    Some(match param {
        "app_id" => {
            let uid = format!("doomed-{}", unique());
            admin
                .made("/app", json!({"name": "doomed", "uid": uid}), 201)
                .await;
            uid
        }
        "endpoint_id" if operational(rule) => fresh_operational_endpoint(admin).await,
        "endpoint_id" if ingest(rule) => fresh_source_endpoint(admin, &seeds.source).await,
        "source_id" => fresh_source(admin).await,
        "endpoint_id" => {
            let url = format!("http://{}/hook", closed_port());
            let path = "/app/acme/endpoint";
            let made = admin.made(path, json!({"url": url}), 201).await;
            made["id"].as_str().unwrap().to_owned()
        }
        "destination_id" => fresh_destination(admin).await,
        "msg_id" => publish(admin, "acme").await,
        "event_type_name" => fresh_event_type(admin).await,
        "token_id" => fresh_token_id(admin).await,
        _ => return None,
    })
}

/// The `{param}` names of a path template, in order.
fn params(template: &str) -> Vec<&str> {
    template
        .split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .collect()
}

/// `rule`'s path with each parameter replaced by `value(param)`.
fn concrete(rule: &Rule, mut value: impl FnMut(&str) -> String) -> String {
    rule.path
        .split('/')
        .map(|segment| match segment.strip_prefix('{') {
            Some(param) => value(param.strip_suffix('}').unwrap()),
            None => segment.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn method(rule: &Rule) -> Method {
    Method::from_bytes(rule.method.as_bytes()).unwrap()
}

fn body(rule: &Rule) -> Option<Value> {
    (rule.method != "GET" && rule.method != "DELETE").then(|| json!({}))
}

/// Whether the request takes away what it names: it gets its own, so the seeds stay.
fn destroys(rule: &Rule) -> bool {
    rule.method == "DELETE" || rule.effect == Effect::EndsOwnToken
}

async fn hookd_with_seeds() -> (Hookd, Client, Seeds, tempfile::TempDir) {
    let (database, dir) = fresh_sqlite();
    // Unlimited app tokens: the checks make more than the default 100 requests a second.
    let args = ["--retry-schedule", "0,1h", "--app-token-rate-limit", "0"];
    let hookd = Hookd::serve_local(&database, ADMIN, &args);
    let admin = Client::new(&hookd, ADMIN);
    let seeds = Seeds::plant(&admin).await;
    (hookd, admin, seeds, dir)
}

/// What one token of `issued` gets for the request `rule` stands for: (its path, status,
/// answer).
async fn request_as(
    admin: &Client,
    seeds: &Seeds,
    rule: &Rule,
    issued: Issued,
    token: &str,
) -> (String, u16, Value) {
    let allowed = rule.allows(issued.kind());
    let last = params(rule.path).last().copied();
    let own = match last {
        Some(param) if allowed && destroys(rule) => fresh(admin, seeds, rule, param).await,
        _ => None,
    };
    let path = concrete(rule, |param| match &own {
        Some(own) if Some(param) == last => own.clone(),
        _ => seeds.value(rule, param),
    });
    let caller = if allowed && rule.effect == Effect::EndsOwnToken {
        admin.with_token(&issued.issue(admin, &seeds.app).await)
    } else {
        admin.with_token(token)
    };
    let (status, out) = caller.call(method(rule), &path, body(rule)).await;
    (path, status, out)
}

#[tokio::test]
async fn every_row_of_the_permission_table_holds_for_every_kind_of_token() {
    let (_hookd, admin, seeds, _dir) = hookd_with_seeds().await;
    // Customers' tokens for acme, and for the source's application (the ingest routes').
    let mut tokens = Vec::new();
    for issued in Issued::ALL {
        let (token, ingest_token) = match issued {
            Issued::ConfiguredAdmin => (ADMIN.to_owned(), ADMIN.to_owned()),
            _ => (
                issued.issue(&admin, &seeds.app).await,
                issued.issue(&admin, &seeds.source_app).await,
            ),
        };
        tokens.push((issued, token, ingest_token));
    }
    let mut wrong = Vec::new();
    for rule in TABLE {
        for (issued, token, ingest_token) in &tokens {
            let token = if ingest(rule) { ingest_token } else { token };
            let (path, status, out) = request_as(&admin, &seeds, rule, *issued, token).await;
            let allowed = rule.allows(issued.kind());
            let right = if allowed {
                !matches!(status, 401 | 403 | 404) && status < 500
            } else {
                status == 403
            };
            if !right {
                let expected = if allowed { "allowed" } else { "403" };
                wrong.push(format!(
                    "{issued:?} {} {path}: {status} {out} (expected {expected})",
                    rule.method
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// What stands for a missing thing of the kind `param` names.
fn missing(param: &str) -> String {
    format!("missing-{}", param.replace('_', "-"))
}

#[tokio::test]
async fn another_customers_things_answer_exactly_as_missing_ones() {
    let (_hookd, admin, seeds, _dir) = hookd_with_seeds().await;
    admin
        .made("/app", json!({"name": "Initech", "uid": "initech"}), 201)
        .await;
    for issued in [Issued::App, Issued::Portal] {
        let initech = admin.with_token(&issued.issue(&admin, "initech").await);
        let mut differ = Vec::new();
        for rule in TABLE.iter().filter(|rule| !params(rule.path).is_empty()) {
            let theirs = concrete(rule, |p| seeds.value(rule, p));
            let absent = concrete(rule, missing);
            // In its own application, with another application's endpoints and messages.
            let own_app = |p: &str| match p {
                "app_id" => "initech".to_owned(),
                other => seeds.value(rule, other),
            };
            let mixed = concrete(rule, own_app);
            let own_absent = concrete(rule, |p| match p {
                "app_id" => "initech".to_owned(),
                other => missing(other),
            });
            let mut pairs = vec![(theirs, absent)];
            if !pairs.iter().any(|(path, _)| *path == mixed) {
                pairs.push((mixed, own_absent));
            }
            for (path, like) in pairs {
                if path == like || rule.path.contains("{event_type_name}") {
                    continue; // The catalog is everyone's.
                }
                let got = initech.call(method(rule), &path, body(rule)).await;
                let expected = initech.call(method(rule), &like, body(rule)).await;
                // A read it may make answers 404; what it may not do, 403 either way.
                let reads = rule.method == "GET" && rule.allows(issued.kind());
                let hidden = !reads || got.0 == 404;
                if got != expected || !hidden {
                    differ.push(format!(
                        "{} {path}: {got:?}; missing: {expected:?}",
                        rule.method
                    ));
                }
            }
        }
        assert!(differ.is_empty(), "{issued:?}:\n{}", differ.join("\n"));
        let tasks = initech.get("/background-task").await;
        assert_eq!(tasks["data"], json!([]), "acme's task is not listed");
    }
    let acme = admin.get("/app/acme/endpoint").await;
    assert!(
        acme["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["id"] == seeds.endpoint),
        "acme's endpoint is still there"
    );
}

#[tokio::test]
async fn a_customer_cannot_take_the_uid_of_a_customer_made_later() {
    let (_hookd, admin, seeds, _dir) = hookd_with_seeds().await;
    let before = admin.get("/app/acme").await;
    for issued in [Issued::App, Issued::Portal] {
        let acme = admin.with_token(&issued.issue(&admin, &seeds.app).await);
        let take = json!({"uid": "globex"});
        let (status, out) = acme.call(Method::PATCH, "/app/acme", Some(take)).await;
        assert_eq!(status, 403, "{issued:?} PATCH: {out}");
        let take = json!({"name": "Acme", "uid": "globex"});
        let (status, out) = acme.call(Method::PUT, "/app/acme", Some(take)).await;
        assert_eq!(status, 403, "{issued:?} PUT: {out}");
    }
    assert_eq!(admin.get("/app/acme").await, before, "acme is unchanged");

    // The provider meets Globex later and publishes to it by uid, creating it on the way.
    let body = json!({
        "eventType": "order.created", "payload": {"for": "globex"},
        "application": {"name": "Globex"}
    });
    let made = admin.made("/app/globex/msg", body, 202).await;
    let globex = admin.get("/app/globex").await;
    assert_ne!(
        globex["id"], before["id"],
        "globex is an application of its own"
    );
    assert_eq!(globex["name"], "Globex");
    let acme_messages = admin.get("/app/acme/msg").await;
    let landed = acme_messages["data"].as_array().unwrap();
    assert!(
        landed.iter().all(|m| m["id"] != made["id"]),
        "globex's event did not land in acme"
    );
}

#[tokio::test]
async fn a_customers_token_cannot_publish_nor_delete_payloads() {
    let (_hookd, admin, seeds, _dir) = hookd_with_seeds().await;
    let content = format!("/app/acme/msg/{}", seeds.message);
    let count = async || {
        admin.get("/app/acme/msg").await["data"]
            .as_array()
            .unwrap()
            .len()
    };
    let published = count().await;
    for issued in [Issued::App, Issued::Portal, Issued::ReadOnlyPortal] {
        let customer = admin.with_token(&issued.issue(&admin, &seeds.app).await);
        let forged = json!({"eventType": "invoice.paid", "payload": {"amount": 1_000_000}});
        let (status, out) = customer
            .call(Method::POST, "/app/acme/msg", Some(forged))
            .await;
        assert_eq!(status, 403, "{issued:?} publishing: {out}");
        let lazily = json!({
            "eventType": "invoice.paid", "payload": {}, "application": {"name": "New"}
        });
        let (status, out) = customer
            .call(Method::POST, "/app/newco/msg", Some(lazily))
            .await;
        assert_eq!(
            status, 403,
            "{issued:?} publishing to a new application: {out}"
        );

        let attempt = format!("{content}/attempt/{}/content", seeds.attempt);
        for (verb, path) in [
            (Method::DELETE, format!("{content}/content")),
            (
                Method::POST,
                "/app/acme/msg/expunge-all-contents".to_owned(),
            ),
            (Method::DELETE, attempt),
        ] {
            let body = (verb == Method::POST).then(|| json!({}));
            let (status, out) = customer.call(verb.clone(), &path, body).await;
            assert_eq!(status, 403, "{issued:?} {verb} {path}: {out}");
        }
    }
    assert_eq!(count().await, published, "nothing was published");
    let kept = admin.get(&content).await;
    assert_eq!(kept["payload"], json!({"n": 1}), "the payload is kept");
    let (status, _) = admin.call(Method::GET, "/app/newco", None).await;
    assert_eq!(status, 404, "no application was made");
}

async fn the_endpoint_limit_answers_422_naming_it(database: &str) {
    let hookd = Hookd::serve_local(database, ADMIN, &["--max-endpoints-per-app", "2"]);
    let admin = Client::new(&hookd, ADMIN);
    admin
        .made("/app", json!({"name": "Acme", "uid": "acme"}), 201)
        .await;
    let url = |n: u16| json!({"url": format!("http://127.0.0.1:9/{n}"), "uid": format!("ep{n}")});
    admin.made("/app/acme/endpoint", url(1), 201).await;
    let portal = admin.with_token(&Issued::Portal.issue(&admin, "acme").await);
    portal.made("/app/acme/endpoint", url(2), 201).await;

    for client in [&admin, &portal] {
        let refused = client.made("/app/acme/endpoint", url(3), 422).await;
        assert_eq!(
            refused["detail"][0]["loc"],
            json!(["body", "url"]),
            "{refused}"
        );
        let message = refused["detail"][0]["msg"].as_str().unwrap();
        assert!(message.contains("--max-endpoints-per-app"), "{message}");
        assert!(message.contains('2'), "{message}");
        let (status, out) = client
            .call(Method::PUT, "/app/acme/endpoint/ep3", Some(url(3)))
            .await;
        assert_eq!(status, 422, "a PUT that would create one: {out}");
    }
    let (status, out) = portal
        .call(Method::PUT, "/app/acme/endpoint/ep2", Some(url(2)))
        .await;
    assert_eq!(status, 200, "changing one at the limit: {out}");
    let (status, _) = admin
        .call(Method::DELETE, "/app/acme/endpoint/ep1", None)
        .await;
    assert_eq!(status, 204);
    admin.made("/app/acme/endpoint", url(3), 201).await;
    admin
        .made("/app", json!({"name": "Other", "uid": "other"}), 201)
        .await;
    admin.made("/app/other/endpoint", url(1), 201).await;
    let listed = admin.get("/app/acme/endpoint").await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 2, "{listed}");
}

#[tokio::test]
async fn the_endpoint_limit_answers_422_naming_it_on_sqlite() {
    let (database, _dir) = fresh_sqlite();
    the_endpoint_limit_answers_422_naming_it(&database).await;
}

#[tokio::test]
async fn the_endpoint_limit_answers_422_naming_it_on_postgres() {
    let Some((url, _db)) = fresh_postgres("permissions::endpoint_limit").await else {
        return;
    };
    the_endpoint_limit_answers_422_naming_it(&url).await;
}

/// The portal (crates/hookd-portal) signed in with a customer's portal link calls these routes
/// with the portal token: each answers it.
#[tokio::test]
async fn the_routes_the_portal_calls_answer_a_portal_token() {
    let (_hookd, admin, seeds, _dir) = hookd_with_seeds().await;
    let portal = admin.with_token(&Issued::Portal.issue(&admin, &seeds.app).await);
    let who = portal.get("/auth/whoami").await;
    assert_eq!(who["scope"], "app");
    let base = format!("/app/acme/endpoint/{}", seeds.endpoint);
    for path in [
        "/app/acme".to_owned(),
        "/app/acme/endpoint?limit=250".to_owned(),
        format!("{base}/stats"),
        format!("{base}/health"),
        format!("{base}/secret"),
        format!("{base}/headers"),
        format!("{base}/msg?status=2&limit=20&with_content=false"),
        format!("/app/acme/attempt/endpoint/{}?limit=20", seeds.endpoint),
        format!("/app/acme/msg/{}/endpoint", seeds.message),
        "/event-type?limit=250".to_owned(),
        "/event-type?limit=250&with_content=false".to_owned(),
        "/app/acme/destination?limit=250&extended=true".to_owned(),
    ] {
        portal.get(&path).await;
    }
    let test_event = json!({"eventType": "order.created"});
    portal
        .made(&format!("{base}/send-example"), test_event, 200)
        .await;
    let patch = json!({"description": "from the portal"});
    let (status, out) = portal.call(Method::PATCH, &base, Some(patch)).await;
    assert_eq!(status, 200, "{out}");
    let resend = format!(
        "/app/acme/msg/{}/endpoint/{}/resend",
        seeds.message, seeds.endpoint
    );
    portal.made(&resend, json!({}), 202).await;
}
