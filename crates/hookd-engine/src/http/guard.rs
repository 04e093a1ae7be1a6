//! The SSRF guard for destinations beyond HTTP: a broker's host (RabbitMQ, NATS, Kafka, an
//! AWS-compatible service) is reached only at addresses the same policy allows an HTTP
//! endpoint, checked where they are resolved, so the addresses checked are the addresses
//! connected to.

use std::net::SocketAddr;

use async_trait::async_trait;
use hookd_sinks::{AddressGuard, SinkError};

use super::resolve::GuardedResolver;
use super::ssrf::Refused;

/// [`AddressGuard`] over the engine's [`GuardedResolver`].
#[derive(Clone, Debug)]
pub(super) struct BrokerGuard(pub(super) GuardedResolver);

#[async_trait]
impl AddressGuard for BrokerGuard {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, SinkError> {
        // A bracketed IPv6 literal (`[::1]`, as URIs write one) resolves without its brackets.
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        match self.0.resolve_checked(bare).await {
            Ok(addrs) => Ok(addrs
                .into_iter()
                .map(|addr| SocketAddr::new(addr.ip(), port))
                .collect()),
            Err(error) => Err(match error.downcast_ref::<Refused>() {
                Some(refused) => SinkError::Refused(refused.to_string()),
                None => SinkError::Connect(format!("cannot resolve {host}: {error}")),
            }),
        }
    }
}
