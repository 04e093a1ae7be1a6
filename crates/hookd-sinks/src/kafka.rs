//! Kafka destinations (hookd's `kafka`): each message becomes one record on the destination's
//! topic, keyed by the ordering key (so one key keeps one partition, in order), and counts as
//! delivered once every in-sync replica has it (`acks = all`). The client, its partition
//! clients and its [`gate`] are kept per destination and made again after a lost connection.
//!
//! # Layout
//! - [`gate`]: the SOCKS5 gate through which every broker connection passes the guard.
//! - [`partition`]: key → partition, as the Java client's default partitioner does it.

pub mod gate;
pub mod partition;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use rskafka::BackoffConfig;
use rskafka::chrono::DateTime;
use rskafka::client::error::Error as KafkaError;
use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use serde::Deserialize;

use crate::broker::{self, DEFAULT_TIMEOUT, Kept};
use crate::{AddressGuard, Publication, Published, Sink, SinkError};
use gate::Gate;

/// A `kafka` destination's configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaConfig {
    /// `host:port` of one or more brokers to learn the cluster from.
    pub bootstrap_servers: Vec<String>,
    /// The topic produced to; it must exist.
    pub topic: String,
}

/// Produces to one Kafka destination.
pub struct KafkaSink {
    config: KafkaConfig,
    guard: Arc<dyn AddressGuard>,
    timeout: Duration,
    producer: Kept<Producer>,
}

/// A connected client: one partition client per partition of the topic, in partition order.
struct Producer {
    gate: Gate,
    // Kept for the partition clients, which share its broker connections.
    _client: Client,
    partitions: Vec<PartitionClient>,
}

impl KafkaSink {
    /// A sink for `config` that reaches brokers only where `guard` allows; it connects on the
    /// first publish. [`SinkError::Config`] without a bootstrap server or with one that is not
    /// `host:port`.
    pub fn new(config: KafkaConfig, guard: Arc<dyn AddressGuard>) -> Result<Self, SinkError> {
        if config.bootstrap_servers.is_empty() {
            return Err(SinkError::Config(
                "bootstrapServers: at least one is needed".into(),
            ));
        }
        for server in &config.bootstrap_servers {
            host_port(server)?;
        }
        Ok(Self {
            config,
            guard,
            timeout: DEFAULT_TIMEOUT,
            producer: Kept::default(),
        })
    }

    /// Bounds each publish, connecting included, to `timeout` instead of [`DEFAULT_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn connect(&self) -> Result<Producer, SinkError> {
        // Refuse a forbidden bootstrap server at once, not after the client's retries.
        for server in &self.config.bootstrap_servers {
            let (host, port) = host_port(server)?;
            self.guard.resolve(host, port).await?;
        }
        let gate = Gate::open(Arc::clone(&self.guard)).await?;
        let (client, partitions) = self.connect_through(&gate).await?;
        Ok(Producer {
            gate,
            _client: client,
            partitions,
        })
    }

    async fn connect_through(
        &self,
        gate: &Gate,
    ) -> Result<(Client, Vec<PartitionClient>), Failure> {
        let failed = |error| Failure::new(error, gate);
        // The client retries a broker it cannot reach; give up in half the time allowed, so
        // the attempt fails with why rather than with a timeout.
        let backoff = BackoffConfig {
            deadline: Some(self.timeout / 2),
            ..BackoffConfig::default()
        };
        let client = ClientBuilder::new(self.config.bootstrap_servers.clone())
            .socks5_proxy(gate.address().to_string())
            .backoff_config(backoff)
            .build()
            .await
            .map_err(failed)?;
        let topic = &self.config.topic;
        let count = client
            .list_topics()
            .await
            .map_err(failed)?
            .into_iter()
            .find(|listed| &listed.name == topic)
            .map(|listed| listed.partitions.len())
            .filter(|count| *count > 0)
            .ok_or_else(|| Failure::rejected("UnknownTopicOrPartition", topic))?;
        let mut partitions = Vec::with_capacity(count);
        for partition in 0..i32::try_from(count).unwrap_or(i32::MAX) {
            let partition = client
                .partition_client(topic.as_str(), partition, UnknownTopicHandling::Error)
                .await
                .map_err(failed)?;
            partitions.push(partition);
        }
        Ok((client, partitions))
    }

    async fn produce(
        &self,
        producer: &Producer,
        batch: &[Publication],
    ) -> Result<Published, SinkError> {
        let mut acks = Vec::with_capacity(batch.len());
        for publication in batch {
            // Without an ordering key, the message id spreads records yet keeps a retried
            // one on the partition it went to before.
            let key = publication
                .ordering_key
                .as_deref()
                .unwrap_or(&publication.message_id);
            let index = partition::for_key(key.as_bytes(), producer.partitions.len());
            let offsets = producer.partitions[index]
                .produce(vec![record(publication)], Compression::NoCompression)
                .await
                .map_err(|error| Failure::new(error, &producer.gate))?;
            let offset = offsets.first().map_or(-1, |offset| *offset);
            acks.push(format!("partition {index} offset {offset}"));
        }
        Ok(broker::summary(acks))
    }

    /// Why the kept producer's latest broker connection failed, if it did.
    async fn gate_failure(&self) -> Option<SinkError> {
        let producer = self.producer.peek().await?;
        producer.gate.failure()
    }

    async fn publish_batch(&self, batch: &[Publication]) -> Result<Published, SinkError> {
        // The client reconnects to brokers by itself; it is made again only after a failure.
        let (producer, _) = self.producer.get(|_| true, self.connect()).await?;
        let result = self.produce(&producer, batch).await;
        self.producer.check(&producer, result).await
    }
}

#[async_trait]
impl Sink for KafkaSink {
    async fn publish(&self, batch: &[Publication]) -> Result<Published, SinkError> {
        match broker::within(self.timeout, self.publish_batch(batch)).await {
            // The client was still retrying a broker the gate could not reach.
            Err(SinkError::Timeout) => Err(self.gate_failure().await.unwrap_or(SinkError::Timeout)),
            other => other,
        }
    }
}

/// The record: key = ordering key, value = payload bytes, headers = [`broker::headers`].
fn record(publication: &Publication) -> Record {
    let headers = broker::headers(publication)
        .map(|(name, value)| (name.to_owned(), value.as_bytes().to_vec()))
        .collect::<BTreeMap<_, _>>();
    Record {
        key: publication
            .ordering_key
            .as_ref()
            .map(|key| key.as_bytes().to_vec()),
        value: Some(publication.body.to_vec()),
        headers,
        timestamp: DateTime::from_timestamp_millis(now_millis()).unwrap_or_default(),
    }
}

/// The record's timestamp: when it was produced.
fn now_millis() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

/// `host:port` (`[v6]:port` for an IPv6 address) split for the guard.
fn host_port(server: &str) -> Result<(&str, u16), SinkError> {
    let invalid = || SinkError::Config(format!("bootstrapServers: {server:?} is not host:port"));
    let (host, port) = server.rsplit_once(':').ok_or_else(invalid)?;
    let host = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    let port = port.parse().map_err(|_| invalid())?;
    if host.is_empty() {
        return Err(invalid());
    }
    Ok((host, port))
}

/// A client error, with what the gate saw of the connection when it is a connection error.
struct Failure {
    error: SinkError,
    connection: bool,
    gate: Option<SinkError>,
}

impl Failure {
    fn new(error: KafkaError, gate: &Gate) -> Self {
        let connection = !matches!(error, KafkaError::ServerError { .. } | KafkaError::Timeout);
        Self {
            error: kafka_error(error),
            connection,
            gate: gate.failure(),
        }
    }

    fn rejected(code: &str, topic: &str) -> Self {
        Self {
            error: SinkError::Rejected {
                code: code.to_owned(),
                text: format!("the cluster has no topic {topic:?}"),
            },
            connection: false,
            gate: None,
        }
    }
}

impl From<Failure> for SinkError {
    /// The gate's reason (a refusal, a refused connection) for a connection error, which the
    /// client only knows as a failed proxy request; else the error itself.
    fn from(failure: Failure) -> Self {
        match (failure.connection, failure.gate) {
            (true, Some(reason)) => reason,
            _ => failure.error,
        }
    }
}

/// A broker's error code is its answer; the client's own timeout is a timeout; anything else
/// means no usable connection.
fn kafka_error(error: KafkaError) -> SinkError {
    match error {
        KafkaError::ServerError {
            protocol_error,
            error_message,
            ..
        } => SinkError::Rejected {
            code: format!("{protocol_error:?}"),
            text: error_message.unwrap_or_else(|| protocol_error.to_string()),
        },
        KafkaError::Timeout => SinkError::Timeout,
        other => SinkError::Connect(other.to_string()),
    }
}
