//! NATS JetStream destinations (hookd's `natsJetStream`): each message is published to the
//! destination's subject and counts as delivered once the stream that captures it answers
//! with its acknowledgement. The client is kept per destination; it reconnects by itself, and
//! only ever to the addresses the guard allowed.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::{Client, ConnectOptions, HeaderMap, ServerAddr};
use async_trait::async_trait;
use serde::Deserialize;

use crate::broker::{self, DEFAULT_TIMEOUT, Kept};
use crate::{AddressGuard, Publication, Published, Sink, SinkError};

/// The header JetStream deduplicates on (within the stream's duplicate window).
const MSG_ID_HEADER: &str = "Nats-Msg-Id";

/// A `natsJetStream` destination's configuration.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NatsConfig {
    /// `nats://host:4222` URLs (`nats://user:password@host:4222` to log in); tried in turn.
    pub servers: Vec<String>,
    /// The subject published to; a stream must capture it.
    pub subject: String,
}

/// Publishes to one NATS JetStream destination.
pub struct NatsSink {
    servers: Vec<ServerAddr>,
    subject: String,
    guard: Arc<dyn AddressGuard>,
    timeout: Duration,
    client: Kept<Client>,
}

impl NatsSink {
    /// A sink for `config` that reaches servers only where `guard` allows; it connects on the
    /// first publish. [`SinkError::Config`] for a URL that does not parse, no server, or a
    /// `tls://` server (not served yet: the client would check the certificate against the
    /// address it connects at, not the name).
    pub fn new(config: NatsConfig, guard: Arc<dyn AddressGuard>) -> Result<Self, SinkError> {
        let servers = config
            .servers
            .iter()
            .map(|url| server(url))
            .collect::<Result<Vec<_>, _>>()?;
        if servers.is_empty() {
            return Err(SinkError::Config("servers: at least one is needed".into()));
        }
        Ok(Self {
            servers,
            subject: config.subject,
            guard,
            timeout: DEFAULT_TIMEOUT,
            client: Kept::default(),
        })
    }

    /// Bounds each publish, connecting included, to `timeout` instead of [`DEFAULT_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Connects at the checked addresses of every server, never at ones a server advertises.
    async fn connect(&self) -> Result<Client, SinkError> {
        let mut checked = Vec::new();
        for server in &self.servers {
            for address in self.guard.resolve(server.host(), server.port()).await? {
                checked.push(
                    ServerAddr::from_str(&format!("nats://{address}"))
                        .map_err(|e| SinkError::Config(format!("servers: {address}: {e}")))?,
                );
            }
        }
        let mut options = ConnectOptions::new()
            .ignore_discovered_servers()
            .connection_timeout(self.timeout);
        if let Some(user) = self.servers[0].username() {
            options = match self.servers[0].password() {
                Some(password) => options.user_and_password(user.into(), password.into()),
                None => options.token(user.into()),
            };
        }
        options
            .connect(checked)
            .await
            .map_err(|e| SinkError::Connect(e.to_string()))
    }

    /// Whether a client was made but has no connection now (it is trying to reconnect).
    async fn disconnected(&self) -> bool {
        let client = self.client.peek().await;
        client.is_some_and(|client| client.connection_state() != State::Connected)
    }

    async fn publish_batch(
        &self,
        client: &Client,
        batch: &[Publication],
    ) -> Result<Published, SinkError> {
        let jetstream = async_nats::jetstream::new(client.clone());
        let mut acks = Vec::with_capacity(batch.len());
        for publication in batch {
            let ack = jetstream
                .publish_with_headers(
                    self.subject.clone(),
                    headers(publication),
                    publication.body.clone(),
                )
                .await
                .map_err(publish_error)?
                .await
                .map_err(publish_error)?;
            let duplicate = if ack.duplicate { " (duplicate)" } else { "" };
            acks.push(format!(
                "stream {} sequence {}{duplicate}",
                ack.stream, ack.sequence
            ));
        }
        Ok(broker::summary(acks))
    }
}

#[async_trait]
impl Sink for NatsSink {
    async fn publish(&self, batch: &[Publication]) -> Result<Published, SinkError> {
        let published = broker::within(self.timeout, async {
            // The client reconnects by itself, to the same checked addresses.
            let (client, _) = self.client.get(|_| true, self.connect()).await?;
            self.publish_batch(&client, batch).await
        })
        .await;
        match published {
            // The client was waiting to reconnect, not for a slow server.
            Err(SinkError::Timeout) if self.disconnected().await => Err(SinkError::Connect(
                "no connection to the NATS server".into(),
            )),
            other => other,
        }
    }
}

/// One server URL, without TLS (see [`NatsSink::new`]).
fn server(url: &str) -> Result<ServerAddr, SinkError> {
    let server =
        ServerAddr::from_str(url).map_err(|e| SinkError::Config(format!("servers: {e}")))?;
    if server.tls_required() || server.is_websocket() {
        return Err(SinkError::Config(format!(
            "servers: only nats:// servers are served, not {url}"
        )));
    }
    Ok(server)
}

/// [`broker::headers`] as NATS headers, and `Nats-Msg-Id` = `webhook-id`, so a retried
/// publish the stream already has is acknowledged as a duplicate instead of stored twice.
fn headers(publication: &Publication) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in broker::headers(publication) {
        headers.insert(name, value);
    }
    headers.insert(MSG_ID_HEADER, publication.message_id.as_str());
    headers
}

/// A lost connection or a missing answer is the connection's fault; anything else (no stream
/// for the subject, a limit) the server's answer.
fn publish_error(error: PublishError) -> SinkError {
    match error.kind() {
        PublishErrorKind::TimedOut => SinkError::Timeout,
        PublishErrorKind::BrokenPipe => SinkError::Connect(error.to_string()),
        kind => SinkError::Rejected {
            code: format!("{kind:?}"),
            text: error.to_string(),
        },
    }
}
