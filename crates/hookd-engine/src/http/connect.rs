//! The direct client: hyper's pooled HTTP/1.1 client, over a connector that resolves names
//! through the SSRF guard, connects with TCP keep-alive and without Nagle's delay, speaks TLS
//! with the sender's shared configuration, and gives up on a connection (TCP and TLS together)
//! after the connect timeout.
//!
//! hyper's client is driven directly rather than through reqwest: a delivery needs none of
//! reqwest's layers (redirects, retries, cookies, decompression), and they cost as much again
//! as the exchange itself (reqwest parses the URL twice more per request and clones its
//! headers). reqwest still carries deliveries through an egress proxy (see `http`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::ClientConfig;

use super::resolve::GuardedResolver;
use super::{BoxError, HttpConfig};

/// The client of one slot of [`super::lifetime::AgedClients`]. Cheap to clone.
pub(super) type Direct = Client<Timed<HttpsConnector<HttpConnector<GuardedResolver>>>, Full<Bytes>>;

/// How long an idle pooled connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(90);
/// TCP keep-alive probes: after this long idle, then this often, at most [`KEEPALIVE_PROBES`].
const KEEPALIVE: Duration = Duration::from_secs(15);
const KEEPALIVE_PROBES: u32 = 3;
/// How long sent data may go unacknowledged before the connection is dropped.
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

/// A direct client resolving through `resolver` and verifying certificates with `tls`.
pub(super) fn direct(
    config: &HttpConfig,
    resolver: GuardedResolver,
    tls: Arc<ClientConfig>,
) -> Direct {
    let mut tcp = HttpConnector::new_with_resolver(resolver);
    // The TLS layer above takes `https` URLs; this one only opens their TCP connections.
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(config.connect_timeout));
    tcp.set_keepalive(Some(KEEPALIVE));
    tcp.set_keepalive_interval(Some(KEEPALIVE));
    tcp.set_keepalive_retries(Some(KEEPALIVE_PROBES));
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    tcp.set_tcp_user_timeout(Some(TCP_USER_TIMEOUT));
    let connector = Timed {
        inner: HttpsConnector::from((tcp, tls)),
        timeout: config.connect_timeout,
    };
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE)
        .build(connector)
}

/// A connector that fails once `timeout` has passed without a connection.
#[derive(Clone, Debug)]
pub(super) struct Timed<C> {
    inner: C,
    timeout: Duration,
}

impl<C> tower_service::Service<Uri> for Timed<C>
where
    C: tower_service::Service<Uri, Error = BoxError>,
    C::Future: Send + 'static,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let timeout = self.timeout;
        Box::pin(async move {
            match tokio::time::timeout(timeout, connecting).await {
                Ok(connected) => connected,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out").into()),
            }
        })
    }
}
