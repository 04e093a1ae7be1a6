//! The outbound HTTP layer: sends one webhook attempt and reports what happened.
//!
//! One [`WebhookSender`] holds the process's clients (a few, endpoint origins spread over
//! them), so connections to an endpoint are pooled across attempts; a client older than the
//! connection lifetime is replaced, so a receiver's DNS change is followed. It follows the
//! delivery rules: redirects are never followed (a 3xx is a failed attempt), nothing is retried
//! within an attempt (the schedule is hookd's), environment proxies are ignored, the connect
//! and whole-attempt timeouts are enforced, TLS certificates are verified, and only a small
//! prefix of the response is kept. Each endpoint URL is parsed and checked once, then kept.
//!
//! Deliveries go over hyper's client directly (`connect`); through an egress proxy they go over
//! reqwest's, which speaks to HTTP proxies (absolute-form requests, `CONNECT` tunnels, proxy
//! credentials).
//!
//! The SSRF guard ([`AddressPolicy`]) applies twice: IP-literal hosts are checked before
//! sending, and host names are checked by the resolver the client connects through. With an
//! egress proxy, the proxy connects, resolving names itself; so hookd resolves each name and
//! checks its addresses before handing the request to the proxy. A name whose answer changes
//! between that lookup and the proxy's own (DNS rebinding) can still slip through, which only
//! a proxy enforcing its own address policy prevents.

mod capture;
mod connect;
mod guard;
mod lifetime;
mod resolve;
pub mod ssrf;
mod tls;

use std::collections::HashMap;
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use hookd_core::{Clock, SystemClock};
use http::header::{ACCEPT, AUTHORIZATION, HOST, HeaderMap, HeaderValue, USER_AGENT};
use http::{Method, Uri};
use http_body_util::Full;
use reqwest::{Proxy, redirect, retry};
use url::{Host, Url};

use capture::{Captured, Limits, capture};
use connect::Direct;
use lifetime::AgedClients;
use resolve::GuardedResolver;
pub use resolve::HostLookup;
use ssrf::{AddressPolicy, Refused};

/// The error type of connectors and resolvers.
pub(crate) type BoxError = Box<dyn Error + Send + Sync>;

/// How the shared client is built.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Time allowed to open a connection (TCP and TLS). Default 5 s.
    pub connect_timeout: Duration,
    /// The `user-agent` of every attempt. Default `hookd/<version>`.
    pub user_agent: String,
    /// The SSRF guard. On by default.
    pub policy: AddressPolicy,
    /// Send every delivery through this proxy URL (for a fixed egress IP). Host names are
    /// resolved and checked against `policy` before the request goes to the proxy, which
    /// resolves them again itself.
    pub egress_proxy: Option<String>,
    /// Bytes of the response body kept for the attempt log. Default 64 KiB.
    pub max_body_bytes: usize,
    /// Bytes of the response status line and headers kept for the attempt log. Default 8 KiB.
    pub max_head_bytes: usize,
    /// How host names are resolved; the system resolver when `None` (the default).
    pub lookup: Option<Arc<dyn HostLookup>>,
    /// PEM bundles of root certificates trusted besides the system's: a private CA's, for
    /// endpoints inside a private deployment. Certificates are verified either way.
    pub extra_roots: Vec<Vec<u8>>,
    /// How long connections to an endpoint origin are pooled before they are closed and the
    /// name resolved again (see [`HttpConfig::DEFAULT_CONNECTION_LIFETIME`]).
    pub connection_lifetime: Duration,
}

impl HttpConfig {
    /// Two minutes: a receiver's DNS change is followed within that, and reconnecting that
    /// rarely costs one TLS handshake per endpoint every two minutes.
    pub const DEFAULT_CONNECTION_LIFETIME: Duration = Duration::from_secs(120);
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            user_agent: concat!("hookd/", env!("CARGO_PKG_VERSION")).to_owned(),
            policy: AddressPolicy::default(),
            egress_proxy: None,
            max_body_bytes: 64 * 1024,
            max_head_bytes: 8 * 1024,
            lookup: None,
            extra_roots: Vec::new(),
            connection_lifetime: Self::DEFAULT_CONNECTION_LIFETIME,
        }
    }
}

/// Why the HTTP client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("invalid egress proxy {url}: {source}")]
    Proxy {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("invalid root certificates (PEM expected): {0}")]
    Roots(#[source] rustls::pki_types::pem::Error),
    #[error("cannot set up TLS: {0}")]
    Tls(#[source] rustls::Error),
    #[error("invalid user agent {0:?}")]
    UserAgent(String),
}

/// One attempt to send.
#[derive(Debug, Clone)]
pub struct OutgoingRequest {
    /// The endpoint URL; it is POSTed to.
    pub url: String,
    /// `webhook-*`, `content-type` and the endpoint's custom headers. `user-agent` is added.
    pub headers: HeaderMap,
    /// The body, sent byte for byte as stored (never re-serialized).
    pub body: Bytes,
    /// The whole attempt: connecting, sending and reading the kept part of the response.
    pub timeout: Duration,
}

/// What an attempt produced. `error` is set exactly when `status` is not: a response whose
/// body failed or timed out part way keeps its status and the part of the body that was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOutcome {
    /// The response status, `None` when no response arrived.
    pub status: Option<u16>,
    /// From the start of `send` to the end of reading the kept body.
    pub duration: Duration,
    /// `HTTP/1.1 503 Service Unavailable\r\nname: value…`, capped at `max_head_bytes`.
    pub response_head: String,
    /// The first `max_body_bytes` of the body, decoded as lossy UTF-8.
    pub response_body: String,
    /// The raw `Retry-After` header value, if any.
    pub retry_after: Option<String>,
    /// Why there was no response.
    pub error: Option<SendError>,
}

impl SendOutcome {
    /// Whether the receiver accepted the webhook: a 2xx status, nothing else.
    pub fn is_success(&self) -> bool {
        self.status
            .is_some_and(|status| (200..300).contains(&status))
    }

    fn answered(captured: Captured, duration: Duration) -> Self {
        Self {
            status: Some(captured.status),
            duration,
            response_head: captured.head,
            response_body: captured.body,
            retry_after: captured.retry_after,
            error: None,
        }
    }

    /// A destination beyond HTTP acknowledged the message: shown as a `200` whose body is the
    /// broker's acknowledgement.
    pub(crate) fn acknowledged(acknowledgement: String, duration: Duration) -> Self {
        Self {
            status: Some(200),
            duration,
            response_head: String::new(),
            response_body: acknowledgement,
            retry_after: None,
            error: None,
        }
    }

    pub(crate) fn failed(error: SendError, duration: Duration) -> Self {
        Self {
            status: None,
            duration,
            response_head: String::new(),
            response_body: String::new(),
            retry_after: None,
            error: Some(error),
        }
    }
}

/// Why an attempt got no response. The message is the text for the attempt log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The SSRF guard refused the address.
    #[error("{0}")]
    Refused(String),
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    /// No connection (refused, unreachable, DNS failure, TLS failure, connect timeout).
    #[error("connection failed: {0}")]
    Connect(String),
    /// No response within the attempt's timeout.
    #[error("timed out waiting for a response")]
    Timeout,
    /// The request could not be built or the exchange failed (for example, a reset).
    #[error("request failed: {0}")]
    Request(String),
}

/// Sends webhook attempts over one shared, pooled HTTP client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct WebhookSender {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    clients: AgedClients<Client>,
    targets: Targets,
    policy: AddressPolicy,
    limits: Limits,
    user_agent: HeaderValue,
    /// With an egress proxy: checks host names before the proxy gets them.
    names_before_proxy: Option<GuardedResolver>,
    /// Checks the hosts of destinations beyond HTTP, which no HTTP proxy carries.
    brokers: GuardedResolver,
}

/// One slot's client: hyper's, or reqwest's through an egress proxy.
#[derive(Debug, Clone)]
enum Client {
    Direct(Direct),
    Proxied(reqwest::Client),
}

/// An endpoint URL parsed and checked: where requests go, and the client slot its
/// connections are pooled in.
#[derive(Debug)]
struct Target {
    url: Url,
    /// `url` without its userinfo, as hyper sends it.
    uri: Uri,
    /// `host`, written once rather than by hyper for every request.
    host: Option<HeaderValue>,
    /// The `Basic` credentials of the URL's userinfo, sent unless the endpoint sets its own
    /// `authorization` (reqwest's rule, kept).
    authorization: Option<HeaderValue>,
    slot: usize,
}

/// Endpoint URLs parsed and checked once, by their text (a changed URL is new text).
#[derive(Debug, Default)]
struct Targets(Mutex<HashMap<String, Arc<Target>>>);

/// URLs kept parsed; past it, the map starts again empty.
const KEPT_TARGETS: usize = 4096;

impl WebhookSender {
    /// Builds the sender from `config`, ageing connections by the system clock.
    pub fn new(config: HttpConfig) -> Result<Self, BuildError> {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// Builds the sender from `config`, ageing connections by `clock`.
    pub fn with_clock(config: HttpConfig, clock: Arc<dyn Clock>) -> Result<Self, BuildError> {
        let tls = tls::client_config(&config.extra_roots)?;
        let user_agent = HeaderValue::from_str(&config.user_agent)
            .map_err(|_| BuildError::UserAgent(config.user_agent.clone()))?;
        let resolver = GuardedResolver::new(config.policy.clone(), config.lookup.clone());
        let for_clients = config.clone();
        let build = move || client(&for_clients, &resolver, &tls);
        // Built once here so a bad configuration fails at start, not at the first attempt.
        build()?;
        let clients = AgedClients::new(build, config.connection_lifetime, clock);
        let names_before_proxy = config
            .egress_proxy
            .is_some()
            .then(|| GuardedResolver::new(config.policy.clone(), config.lookup.clone()));
        let brokers = GuardedResolver::new(config.policy.clone(), config.lookup.clone());
        Ok(Self {
            inner: Arc::new(Inner {
                clients,
                targets: Targets::default(),
                names_before_proxy,
                brokers,
                user_agent,
                policy: config.policy,
                limits: Limits {
                    head_bytes: config.max_head_bytes,
                    body_bytes: config.max_body_bytes,
                },
            }),
        })
    }

    /// The SSRF guard as destinations beyond HTTP ask it (see [`hookd_sinks::AddressGuard`]).
    pub fn broker_guard(&self) -> Arc<dyn hookd_sinks::AddressGuard> {
        Arc::new(guard::BrokerGuard(self.inner.brokers.clone()))
    }

    /// POSTs one attempt and reports the outcome; never fails, the outcome says what went wrong.
    pub async fn send(&self, request: OutgoingRequest) -> SendOutcome {
        let started = Instant::now();
        match self.exchange(request).await {
            Ok(captured) => SendOutcome::answered(captured, started.elapsed()),
            Err(error) => SendOutcome::failed(error, started.elapsed()),
        }
    }

    async fn exchange(&self, request: OutgoingRequest) -> Result<Captured, SendError> {
        let target = self.target(&request.url)?;
        self.check_name_before_proxy(&target.url).await?;
        let client = self
            .inner
            .clients
            .client_in(target.slot)
            .map_err(|error| SendError::Request(error.to_string()))?;
        let deadline = tokio::time::Instant::now() + request.timeout;
        let limits = self.inner.limits;
        match client {
            Client::Direct(client) => {
                let request = self.direct_request(&target, request);
                let response =
                    match tokio::time::timeout_at(deadline, client.request(request)).await {
                        Ok(Ok(response)) => response,
                        Ok(Err(error)) => return Err(failure(&error, error.is_connect(), false)),
                        Err(_) => return Err(SendError::Timeout),
                    };
                Ok(capture(response, limits, deadline).await)
            }
            Client::Proxied(client) => {
                let response = client
                    .post(target.url.clone())
                    .headers(request.headers)
                    .timeout(request.timeout)
                    .body(request.body)
                    .send()
                    .await
                    .map_err(|error| reqwest_failure(&error))?;
                Ok(capture(http::Response::from(response), limits, deadline).await)
            }
        }
    }

    /// The POST hyper sends: the endpoint's headers, then `host`, the URL's credentials,
    /// `user-agent` and `accept` unless the endpoint set them.
    fn direct_request(
        &self,
        target: &Target,
        request: OutgoingRequest,
    ) -> http::Request<Full<Bytes>> {
        let mut headers = request.headers;
        if let Some(host) = &target.host {
            headers.entry(HOST).or_insert_with(|| host.clone());
        }
        if let Some(credentials) = &target.authorization {
            headers
                .entry(AUTHORIZATION)
                .or_insert_with(|| credentials.clone());
        }
        headers
            .entry(USER_AGENT)
            .or_insert_with(|| self.inner.user_agent.clone());
        headers
            .entry(ACCEPT)
            .or_insert_with(|| HeaderValue::from_static("*/*"));
        let mut sent = http::Request::new(Full::new(request.body));
        *sent.method_mut() = Method::POST;
        *sent.uri_mut() = target.uri.clone();
        *sent.headers_mut() = headers;
        sent
    }

    /// `raw` parsed and checked, as it was the first time it was sent to.
    fn target(&self, raw: &str) -> Result<Arc<Target>, SendError> {
        if let Some(target) = self.inner.targets.lock().get(raw) {
            return Ok(target.clone());
        }
        let url = self.checked_url(raw)?;
        let (bare, authorization) = without_credentials(&url);
        let uri: Uri = bare
            .as_str()
            .parse()
            .map_err(|error| SendError::InvalidUrl(format!("{raw}: {error}")))?;
        // The URL's port is there only when it is not the scheme's default, as in `host`.
        let host = uri
            .authority()
            .and_then(|authority| HeaderValue::from_str(authority.as_str()).ok());
        let slot = self.inner.clients.slot_for(&url);
        let target = Arc::new(Target {
            url,
            uri,
            host,
            authorization,
            slot,
        });
        let mut targets = self.inner.targets.lock();
        if targets.len() >= KEPT_TARGETS {
            targets.clear();
        }
        targets.insert(raw.to_owned(), target.clone());
        Ok(target)
    }

    /// Parses the URL, and refuses it if its host is a forbidden IP literal.
    fn checked_url(&self, raw: &str) -> Result<Url, SendError> {
        let url =
            Url::parse(raw).map_err(|error| SendError::InvalidUrl(format!("{raw}: {error}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(SendError::InvalidUrl(format!(
                "{raw}: scheme {} is not http or https",
                url.scheme()
            )));
        }
        self.inner
            .policy
            .check_url_host(&url)
            .map_err(|refused| SendError::Refused(refused.to_string()))?;
        Ok(url)
    }
}

impl Targets {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Target>>> {
        self.0.lock().expect("parsed URLs lock")
    }
}

impl WebhookSender {
    /// With an egress proxy, resolves the URL's host name and refuses it if any of its
    /// addresses is forbidden (without one, the resolver the client connects through does this).
    async fn check_name_before_proxy(&self, url: &Url) -> Result<(), SendError> {
        let (Some(resolver), Some(Host::Domain(name))) =
            (&self.inner.names_before_proxy, url.host())
        else {
            return Ok(());
        };
        match resolver.resolve_checked(name).await {
            Ok(_) => Ok(()),
            Err(error) => Err(match error.downcast_ref::<Refused>() {
                Some(refused) => SendError::Refused(refused.to_string()),
                None => SendError::Connect(format!("cannot resolve {name}: {error}")),
            }),
        }
    }
}

/// A slot's client: hyper's over the guarded resolver, or reqwest's through the egress proxy.
fn client(
    config: &HttpConfig,
    resolver: &GuardedResolver,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<Client, BuildError> {
    Ok(match &config.egress_proxy {
        Some(proxy) => Client::Proxied(proxied(config, proxy, tls)?),
        None => Client::Direct(connect::direct(config, resolver.clone(), tls.clone())),
    })
}

/// reqwest's client through `proxy`, which resolves target names itself (so the guarded
/// resolver would only ever see the proxy's own, trusted and often private, name).
fn proxied(
    config: &HttpConfig,
    proxy: &str,
    tls: &rustls::ClientConfig,
) -> Result<reqwest::Client, BuildError> {
    let proxy = Proxy::all(proxy).map_err(|source| BuildError::Proxy {
        url: proxy.to_owned(),
        source,
    })?;
    reqwest::Client::builder()
        .user_agent(config.user_agent.as_str())
        .connect_timeout(config.connect_timeout)
        .redirect(redirect::Policy::none())
        .retry(retry::never())
        .tls_backend_preconfigured(tls.clone())
        .proxy(proxy)
        .build()
        .map_err(BuildError::Client)
}

/// `url` without its userinfo, and the `authorization` value the userinfo stands for:
/// `Basic` over the percent-decoded `user:password`, as reqwest sends it (a user name that is
/// not UTF-8 once decoded leaves the URL as it is; a password that is not is left out).
fn without_credentials(url: &Url) -> (Url, Option<HeaderValue>) {
    let decoded = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .ok()
            .map(String::from)
    };
    let Some(user) = decoded(url.username()) else {
        return (url.clone(), None);
    };
    let password = url.password().and_then(decoded);
    if user.is_empty() && password.is_none() {
        return (url.clone(), None);
    }
    let mut bare = url.clone();
    // Only URLs that cannot have userinfo refuse these, and this one has some.
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    let mut value = String::from("Basic ");
    let pair = format!("{user}:{}", password.unwrap_or_default());
    base64::engine::general_purpose::STANDARD.encode_string(pair, &mut value);
    let authorization = HeaderValue::from_str(&value).ok().map(|mut value| {
        value.set_sensitive(true);
        value
    });
    (bare, authorization)
}

/// A reqwest failure as the attempt log's error. reqwest's own text ("error sending request
/// for url (…)") is left out: the log already has the URL.
fn reqwest_failure(error: &reqwest::Error) -> SendError {
    let cause: &(dyn Error + 'static) = error.source().unwrap_or(error);
    failure(cause, error.is_connect(), error.is_timeout())
}

/// A failed exchange as the attempt log's error, recovering an SSRF refusal raised in the
/// resolver from the error's source chain.
fn failure(error: &(dyn Error + 'static), connect: bool, timeout: bool) -> SendError {
    if let Some(refused) = refusal(error) {
        return SendError::Refused(refused.to_string());
    }
    if connect {
        return SendError::Connect(causes(error));
    }
    if timeout {
        return SendError::Timeout;
    }
    SendError::Request(causes(error))
}

fn refusal<'e>(error: &'e (dyn Error + 'static)) -> Option<&'e Refused> {
    let mut source = Some(error);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<Refused>() {
            return Some(refused);
        }
        source = cause.source();
    }
    None
}

/// The error's text and its causes' joined with `: `; a cause whose text the one before it
/// already holds is skipped.
fn causes(error: &(dyn Error + 'static)) -> String {
    let mut texts: Vec<String> = Vec::new();
    let mut source = Some(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !texts.last().is_some_and(|last| last.contains(&text)) {
            texts.push(text);
        }
        source = cause.source();
    }
    texts.join(": ")
}
