//! RabbitMQ destinations (Svix's `rabbitMq`): each message is published to the default
//! exchange with the destination's routing key and counts as delivered once the broker
//! confirms it (publisher confirms). One connection and one confirm channel are kept per
//! destination and reused; a dropped connection is replaced on the next publish.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::tcp::{AsyncTcpStream, TLSConfig};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::uri::{AMQPScheme, AMQPUri};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ErrorKind};
use serde::Deserialize;

use crate::broker::{self, DEFAULT_TIMEOUT, Kept};
use crate::{AddressGuard, Publication, Published, Sink, SinkError};

/// A `rabbitMq` destination's configuration, as Svix's API takes it.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RabbitMqConfig {
    /// `amqp://user:password@host:port/vhost` (or `amqps://`).
    pub uri: String,
    /// The routing key on the default exchange: the name of the queue that receives.
    pub routing_key: String,
    /// Whether a message no queue takes (`312 NO_ROUTE`) is a failure rather than dropped.
    #[serde(default)]
    pub mandatory: bool,
}

/// Publishes to one RabbitMQ destination.
pub struct RabbitMqSink {
    uri: AMQPUri,
    routing_key: ShortString,
    mandatory: bool,
    guard: Arc<dyn AddressGuard>,
    timeout: Duration,
    link: Kept<Link>,
}

/// A connection and its channel in confirm mode, shared by concurrent publishes.
struct Link {
    connection: Connection,
    channel: Channel,
}

impl Link {
    fn usable(&self) -> bool {
        self.connection.status().connected() && self.channel.status().connected()
    }
}

impl RabbitMqSink {
    /// A sink for `config` that reaches the broker only where `guard` allows; it connects on
    /// the first publish. [`SinkError::Config`] when the URI does not parse.
    pub fn new(config: RabbitMqConfig, guard: Arc<dyn AddressGuard>) -> Result<Self, SinkError> {
        let uri = config
            .uri
            .parse::<AMQPUri>()
            .map_err(|e| SinkError::Config(format!("uri: {e}")))?;
        Ok(Self {
            uri,
            routing_key: config.routing_key.into(),
            mandatory: config.mandatory,
            guard,
            timeout: DEFAULT_TIMEOUT,
            link: Kept::default(),
        })
    }

    /// Bounds each publish, connecting included, to `timeout` instead of [`DEFAULT_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn connect(&self) -> Result<Link, SinkError> {
        let authority = &self.uri.authority;
        let addresses = self.guard.resolve(&authority.host, authority.port).await?;
        let runtime = lapin::runtime::default_runtime().map_err(connect_error)?;
        let connection = Connection::connector(
            self.uri.clone(),
            runtime,
            async move |uri: AMQPUri, runtime| {
                let stream = AsyncTcpStream::connect(&runtime, addresses.clone()).await?;
                Ok(match uri.scheme {
                    AMQPScheme::AMQP => stream,
                    // The certificate is checked against the name, not the address used.
                    AMQPScheme::AMQPS => {
                        stream
                            .into_tls(&uri.authority.host, TLSConfig::default())
                            .await?
                    }
                })
            },
            ConnectionProperties::default(),
        )
        .await
        .map_err(amqp_error)?;
        let channel = connection.create_channel().await.map_err(amqp_error)?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(amqp_error)?;
        Ok(Link {
            connection,
            channel,
        })
    }

    /// Publishes `batch` in order on one link, each confirmed before the next is sent.
    async fn publish_on(&self, link: &Link, batch: &[Publication]) -> Result<Published, SinkError> {
        let mut acks = Vec::with_capacity(batch.len());
        for publication in batch {
            acks.push(self.publish_one(&link.channel, publication).await?);
        }
        Ok(broker::summary(acks))
    }

    async fn publish_one(
        &self,
        channel: &Channel,
        publication: &Publication,
    ) -> Result<String, SinkError> {
        let options = BasicPublishOptions {
            mandatory: self.mandatory,
            ..BasicPublishOptions::default()
        };
        let confirm = channel
            .basic_publish(
                ShortString::from(""),
                self.routing_key.clone(),
                options,
                &publication.body,
                properties(publication),
            )
            .await
            .map_err(amqp_error)?;
        match confirm.await.map_err(amqp_error)? {
            Confirmation::Ack(None) => Ok(format!("ack {}", publication.message_id)),
            // With `mandatory`, an unroutable message is returned, then acknowledged.
            Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
                Err(SinkError::Rejected {
                    code: returned.reply_code.to_string(),
                    text: returned.reply_text.to_string(),
                })
            }
            Confirmation::Nack(None) => Err(SinkError::Rejected {
                code: "nack".to_owned(),
                text: "the broker refused the message".to_owned(),
            }),
            Confirmation::NotRequested => Err(SinkError::Rejected {
                code: "unconfirmed".to_owned(),
                text: "the channel is not in confirm mode".to_owned(),
            }),
        }
    }

    async fn publish_batch(&self, batch: &[Publication]) -> Result<Published, SinkError> {
        let (link, kept) = self.link.get(Link::usable, self.connect()).await?;
        let result = self.publish_on(&link, batch).await;
        let result = self.link.check(&link, result).await;
        if !kept || !matches!(result, Err(SinkError::Connect(_))) {
            return result;
        }
        // A connection held from an earlier publish may have been dropped by the broker (or
        // anything between) unnoticed: one more try on a new one before failing the attempt.
        let (link, _) = self.link.get(Link::usable, self.connect()).await?;
        let result = self.publish_on(&link, batch).await;
        self.link.check(&link, result).await
    }
}

#[async_trait]
impl Sink for RabbitMqSink {
    async fn publish(&self, batch: &[Publication]) -> Result<Published, SinkError> {
        broker::within(self.timeout, self.publish_batch(batch)).await
    }
}

/// The message's AMQP properties: persistent, JSON, `message_id` = `webhook-id`, and every
/// header of [`broker::headers`] as a long-string header.
fn properties(publication: &Publication) -> BasicProperties {
    let mut headers = FieldTable::default();
    for (name, value) in broker::headers(publication) {
        headers.insert(ShortString::from(name), AMQPValue::LongString(value.into()));
    }
    BasicProperties::default()
        .with_content_type("application/json".into())
        .with_message_id(publication.message_id.as_str().into())
        .with_delivery_mode(2)
        .with_headers(headers)
}

/// An AMQP reply (`404 NOT_FOUND`, `403 ACCESS_REFUSED`) is the broker's rejection; anything
/// else means the connection or channel is gone.
fn amqp_error(error: lapin::Error) -> SinkError {
    match error.kind() {
        ErrorKind::ProtocolError(reply) => SinkError::Rejected {
            code: reply.get_id().to_string(),
            text: reply.to_string(),
        },
        _ => connect_error(error),
    }
}

fn connect_error(error: lapin::Error) -> SinkError {
    SinkError::Connect(error.to_string())
}
