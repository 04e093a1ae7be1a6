//! The DNS resolver that enforces the SSRF guard on host names.
//!
//! The client connects only to the addresses its resolver returns, so checking them here is safe
//! against DNS rebinding: the addresses checked are the addresses connected to, with no second
//! lookup. A host is refused whole if any of its addresses is forbidden, so a name cannot mix
//! a public address with a private one and hope the private one is tried.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::dns;

use crate::http::BoxError;

use crate::http::ssrf::AddressPolicy;

/// Turns a host name into addresses. hookd uses the system resolver; tests hand in scripted
/// answers (a name resolving to a private range, a name that changes its answer between
/// lookups) to prove that every answer is checked and that the checked answer is the one
/// connected to.
pub trait HostLookup: Send + Sync + fmt::Debug + 'static {
    /// The addresses `host` stands for, looked up afresh.
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;
}

/// Resolves with `lookup` (the system resolver, through tokio, when `None`) and checks every
/// address.
#[derive(Clone, Debug)]
pub(super) struct GuardedResolver {
    policy: Arc<AddressPolicy>,
    lookup: Option<Arc<dyn HostLookup>>,
}

impl GuardedResolver {
    pub(super) fn new(policy: AddressPolicy, lookup: Option<Arc<dyn HostLookup>>) -> Self {
        Self {
            policy: Arc::new(policy),
            lookup,
        }
    }
}

impl GuardedResolver {
    /// The addresses `host` stands for, each checked against the policy: an error if any
    /// is forbidden (the refusal is the error's source).
    pub(super) async fn resolve_checked(&self, host: &str) -> Result<Vec<SocketAddr>, BoxError> {
        // Port 0: the connector puts the URL's port (or the scheme's default) in its place.
        let addrs: Vec<SocketAddr> = match &self.lookup {
            Some(lookup) => lookup
                .lookup(host)
                .await?
                .into_iter()
                .map(|ip| SocketAddr::new(ip, 0))
                .collect(),
            None => tokio::net::lookup_host((host, 0)).await?.collect(),
        };
        for addr in &addrs {
            self.policy
                .check(addr.ip())
                .map_err(|refused| refused.for_host(host))?;
        }
        Ok(addrs)
    }
}

/// As hyper's connector asks for addresses.
impl tower_service::Service<dns::Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: dns::Name) -> Self::Future {
        let resolver = self.clone();
        Box::pin(async move {
            let addrs = resolver.resolve_checked(name.as_str()).await?;
            Ok(addrs.into_iter())
        })
    }
}
