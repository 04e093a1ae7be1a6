//! The outbound HTTP layer: sends one webhook attempt and reports what happened.
//!
//! One [`WebhookSender`] holds the process's `reqwest` clients (a few, endpoint origins spread
//! over them), so connections to an endpoint are pooled across attempts; a client older than
//! the connection lifetime is replaced, so a receiver's DNS change is followed. It follows the delivery rules: redirects are never
//! followed (a 3xx is a failed attempt), reqwest's own retries are off (the schedule is
//! hookd's), environment proxies are ignored, the connect and whole-attempt timeouts are
//! enforced, TLS certificates are verified, and only a small prefix of the response is kept.
//!
//! The SSRF guard ([`AddressPolicy`]) applies twice: IP-literal hosts are checked before
//! sending, and host names are checked by the resolver reqwest connects through. With an
//! egress proxy, the proxy connects, resolving names itself; so hookd resolves each name and
//! checks its addresses before handing the request to the proxy. A name whose answer changes
//! between that lookup and the proxy's own (DNS rebinding) can still slip through, which only
//! a proxy enforcing its own address policy prevents.

mod capture;
mod guard;
mod lifetime;
mod resolve;
pub mod ssrf;

use std::error::Error as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hookd_core::{Clock, SystemClock};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Certificate, Client, Proxy, redirect, retry};
use url::{Host, Url};

use capture::{Captured, Limits, capture};
use lifetime::AgedClients;
use resolve::GuardedResolver;
pub use resolve::HostLookup;
use ssrf::{AddressPolicy, Refused};

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
    Roots(#[source] reqwest::Error),
}

/// One attempt to send.
#[derive(Debug, Clone)]
pub struct OutgoingRequest {
    /// The endpoint URL; it is POSTed to.
    pub url: String,
    /// `webhook-*`, `content-type` and the endpoint's custom headers. `user-agent` is added.
    pub headers: Vec<(String, String)>,
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
    clients: AgedClients,
    policy: AddressPolicy,
    limits: Limits,
    /// With an egress proxy: checks host names before the proxy gets them.
    names_before_proxy: Option<GuardedResolver>,
    /// Checks the hosts of destinations beyond HTTP, which no HTTP proxy carries.
    brokers: GuardedResolver,
}

impl WebhookSender {
    /// Builds the sender from `config`, ageing connections by the system clock.
    pub fn new(config: HttpConfig) -> Result<Self, BuildError> {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// Builds the sender from `config`, ageing connections by `clock`.
    pub fn with_clock(config: HttpConfig, clock: Arc<dyn Clock>) -> Result<Self, BuildError> {
        // Built once here so a bad configuration fails at start, not at the first attempt.
        build_client(&config)?;
        let for_clients = config.clone();
        let clients = AgedClients::new(
            move || build_client(&for_clients),
            config.connection_lifetime,
            clock,
        );
        let names_before_proxy = config
            .egress_proxy
            .is_some()
            .then(|| GuardedResolver::new(config.policy.clone(), config.lookup.clone()));
        let brokers = GuardedResolver::new(config.policy.clone(), config.lookup.clone());
        Ok(Self {
            inner: Arc::new(Inner {
                clients,
                names_before_proxy,
                brokers,
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
        let url = self.checked_url(&request.url)?;
        self.check_name_before_proxy(&url).await?;
        let client = self
            .inner
            .clients
            .client_for(&url)
            .map_err(|error| SendError::Request(error.to_string()))?;
        let response = client
            .post(url)
            .headers(header_map(&request.headers)?)
            .timeout(request.timeout)
            .body(request.body)
            .send()
            .await
            .map_err(|error| classify(&error))?;
        Ok(capture(response, self.inner.limits).await)
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

impl WebhookSender {
    /// With an egress proxy, resolves the URL's host name and refuses it if any of its
    /// addresses is forbidden (without one, the resolver reqwest connects through does this).
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

fn build_client(config: &HttpConfig) -> Result<Client, BuildError> {
    let builder = Client::builder()
        .user_agent(config.user_agent.as_str())
        .connect_timeout(config.connect_timeout)
        .redirect(redirect::Policy::none())
        .retry(retry::never());
    let builder = config
        .extra_roots
        .iter()
        .try_fold(builder, |builder, pem| {
            let roots = Certificate::from_pem_bundle(pem).map_err(BuildError::Roots)?;
            Ok(builder.tls_certs_merge(roots))
        })?;
    let builder = match &config.egress_proxy {
        // The proxy resolves target names, so the guarded resolver would only ever see the
        // proxy's own (trusted, often private) name.
        Some(url) => builder.proxy(Proxy::all(url).map_err(|source| BuildError::Proxy {
            url: url.clone(),
            source,
        })?),
        None => builder.no_proxy().dns_resolver(GuardedResolver::new(
            config.policy.clone(),
            config.lookup.clone(),
        )),
    };
    builder.build().map_err(BuildError::Client)
}

fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, SendError> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let invalid = || SendError::Request(format!("invalid header {name:?}"));
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
        let value = HeaderValue::from_bytes(value.as_bytes()).map_err(|_| invalid())?;
        map.append(name, value);
    }
    Ok(map)
}

/// Turns a reqwest failure into the attempt log's error, recovering an SSRF refusal raised in
/// the resolver from the error's source chain.
fn classify(error: &reqwest::Error) -> SendError {
    if let Some(refused) = refusal(error) {
        return SendError::Refused(refused.to_string());
    }
    if error.is_connect() {
        return SendError::Connect(causes(error));
    }
    if error.is_timeout() {
        return SendError::Timeout;
    }
    SendError::Request(causes(error))
}

fn refusal(error: &reqwest::Error) -> Option<&Refused> {
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<Refused>() {
            return Some(refused);
        }
        source = cause.source();
    }
    None
}

/// The error's causes joined with `: `, without reqwest's outer "error sending request for url
/// (…)" (the log already has the URL). Causes whose text repeats the previous one are skipped.
fn causes(error: &reqwest::Error) -> String {
    let mut texts: Vec<String> = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !texts.last().is_some_and(|last| last.contains(&text)) {
            texts.push(text);
        }
        source = cause.source();
    }
    if texts.is_empty() {
        error.to_string()
    } else {
        texts.join(": ")
    }
}
