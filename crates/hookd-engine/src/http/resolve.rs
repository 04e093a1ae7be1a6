//! The DNS resolver that enforces the SSRF guard on host names.
//!
//! reqwest connects only to the addresses its resolver returns, so checking them here is safe
//! against DNS rebinding: the addresses checked are the addresses connected to, with no second
//! lookup. A host is refused whole if any of its addresses is forbidden, so a name cannot mix
//! a public address with a private one and hope the private one is tried.

use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::ssrf::AddressPolicy;

/// Resolves with the system resolver (through tokio) and checks every address.
pub(super) struct GuardedResolver {
    policy: Arc<AddressPolicy>,
}

impl GuardedResolver {
    pub(super) fn new(policy: AddressPolicy) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = Arc::clone(&self.policy);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: reqwest puts the URL's port (or the scheme's default) in its place.
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for addr in &addrs {
                policy
                    .check(addr.ip())
                    .map_err(|refused| refused.for_host(&host))?;
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}
