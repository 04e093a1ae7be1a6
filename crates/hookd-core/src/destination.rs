//! What an endpoint delivers to: an HTTP URL, or a destination of another kind (a queue, a
//! topic, a bucket, a stream, or nothing at all for a polling destination, which its
//! consumer reads from). Only the non-secret part of a destination's configuration lives
//! here, and in the database in clear; its credentials are sealed with the endpoint's keys.

use serde::{Deserialize, Serialize};

/// The name a destination's broker URI (with its password) is sealed under, with the keys.
pub const URI_SECRET: &str = "uri";
/// The name an AWS destination's secret access key is sealed under, with the keys.
pub const SECRET_ACCESS_KEY: &str = "secretAccessKey";

/// An endpoint's kind, with the non-secret configuration of the kinds that have one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Destination {
    /// An HTTP endpoint, made through the endpoint routes.
    #[default]
    Http,
    /// An HTTP endpoint made through the destination routes (`fifoEndpoint`): delivered one
    /// message at a time, in publish order.
    Fifo,
    /// Messages are not pushed anywhere: the consumer polls them (`pollingEndpoint`).
    Polling,
    RabbitMq(RabbitMqConfig),
    Sqs(SqsConfig),
    Sns(SnsConfig),
    AmazonS3(AmazonS3Config),
    NatsJetStream(NatsConfig),
    Kafka(KafkaConfig),
}

/// A RabbitMQ exchange reached through an AMQP URI.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RabbitMqConfig {
    /// The URI with its password masked; the whole URI is sealed with the keys when it has one.
    pub uri: String,
    pub routing_key: String,
    /// Whether a message no queue takes is a failed attempt.
    #[serde(default)]
    pub mandatory: bool,
}

/// Where and as whom an AWS (or AWS-compatible) service is called; the secret key that goes
/// with `access_key_id` is sealed with the endpoint's keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsAccess {
    pub region: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
    /// The service's URL, for AWS-compatible services (the region's AWS URL otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_url: Option<String>,
}

/// An SQS queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SqsConfig {
    pub queue_url: String,
    #[serde(flatten)]
    pub access: AwsAccess,
}

/// An SNS topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnsConfig {
    pub topic_arn: String,
    #[serde(flatten)]
    pub access: AwsAccess,
}

/// An S3 (or S3-compatible) bucket, written one object per batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmazonS3Config {
    pub bucket: String,
    #[serde(flatten)]
    pub access: AwsAccess,
}

/// A NATS JetStream subject (hookd extension).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NatsConfig {
    /// The server URL with its password masked; sealed whole with the keys when it has one.
    pub url: String,
    pub subject: String,
}

/// A Kafka topic (hookd extension).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaConfig {
    /// `host:port` of the brokers to bootstrap from.
    pub bootstrap_servers: Vec<String>,
    pub topic: String,
}

/// Why a stored kind and configuration do not make a [`Destination`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("endpoint kind {kind:?}: {reason}")]
pub struct StoredKindError {
    pub kind: String,
    pub reason: String,
}

impl Destination {
    /// The name the database stores the kind under.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Fifo => "fifo",
            Self::Polling => "polling",
            Self::RabbitMq(_) => "rabbitMq",
            Self::Sqs(_) => "sqs",
            Self::Sns(_) => "sns",
            Self::AmazonS3(_) => "amazonS3",
            Self::NatsJetStream(_) => "natsJetStream",
            Self::Kafka(_) => "kafka",
        }
    }

    /// Whether the engine delivers to it (it has deliveries and a delivery log): every kind
    /// but [`Self::Polling`], whose consumer reads the messages itself.
    pub fn is_delivered(&self) -> bool {
        !matches!(self, Self::Polling)
    }

    /// Whether hookd's HTTP sender delivers it (the endpoint routes show only [`Self::Http`]).
    pub fn is_http(&self) -> bool {
        matches!(self, Self::Http | Self::Fifo)
    }

    /// The configuration as the database stores it: JSON, `None` for kinds without one.
    pub fn stored_config(&self) -> Option<String> {
        let json = match self {
            Self::Http | Self::Fifo | Self::Polling => return None,
            Self::RabbitMq(c) => serde_json::to_string(c),
            Self::Sqs(c) => serde_json::to_string(c),
            Self::Sns(c) => serde_json::to_string(c),
            Self::AmazonS3(c) => serde_json::to_string(c),
            Self::NatsJetStream(c) => serde_json::to_string(c),
            Self::Kafka(c) => serde_json::to_string(c),
        };
        Some(json.expect("a destination's configuration serializes"))
    }

    /// The destination a row's `kind` and `config` columns describe.
    pub fn from_stored(kind: &str, config: Option<&str>) -> Result<Self, StoredKindError> {
        let error = |reason: String| StoredKindError {
            kind: kind.to_owned(),
            reason,
        };
        let parse = |config: Option<&str>| -> Result<serde_json::Value, StoredKindError> {
            let text = config.ok_or_else(|| error("no configuration".into()))?;
            serde_json::from_str(text).map_err(|e| error(e.to_string()))
        };
        let typed = |value| -> Result<Self, serde_json::Error> {
            Ok(match kind {
                "rabbitMq" => Self::RabbitMq(serde_json::from_value(value)?),
                "sqs" => Self::Sqs(serde_json::from_value(value)?),
                "sns" => Self::Sns(serde_json::from_value(value)?),
                "amazonS3" => Self::AmazonS3(serde_json::from_value(value)?),
                "natsJetStream" => Self::NatsJetStream(serde_json::from_value(value)?),
                _ => Self::Kafka(serde_json::from_value(value)?),
            })
        };
        match kind {
            "http" => Ok(Self::Http),
            "fifo" => Ok(Self::Fifo),
            "polling" => Ok(Self::Polling),
            "rabbitMq" | "sqs" | "sns" | "amazonS3" | "natsJetStream" | "kafka" => {
                typed(parse(config)?).map_err(|e| error(e.to_string()))
            }
            _ => Err(error("not a kind hookd knows".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_as_stored() {
        let kinds = [
            Destination::Http,
            Destination::Fifo,
            Destination::Polling,
            Destination::RabbitMq(RabbitMqConfig {
                uri: "amqp://guest:********@127.0.0.1:5672/%2f".into(),
                routing_key: "k".into(),
                mandatory: true,
            }),
            Destination::Sqs(SqsConfig {
                queue_url: "http://127.0.0.1:5000/1/q".into(),
                access: AwsAccess {
                    region: "us-east-1".into(),
                    access_key_id: Some("AK".into()),
                    endpoint_url: None,
                },
            }),
            Destination::Sns(SnsConfig {
                topic_arn: "arn:aws:sns:us-east-1:1:t".into(),
                access: AwsAccess {
                    region: "us-east-1".into(),
                    access_key_id: None,
                    endpoint_url: Some("http://127.0.0.1:5000".into()),
                },
            }),
            Destination::AmazonS3(AmazonS3Config {
                bucket: "bucket".into(),
                access: AwsAccess {
                    region: "eu-west-1".into(),
                    access_key_id: None,
                    endpoint_url: None,
                },
            }),
            Destination::NatsJetStream(NatsConfig {
                url: "nats://127.0.0.1:4222".into(),
                subject: "hooks".into(),
            }),
            Destination::Kafka(KafkaConfig {
                bootstrap_servers: vec!["127.0.0.1:9092".into()],
                topic: "hooks".into(),
            }),
        ];
        for kind in kinds {
            let config = kind.stored_config();
            let back = Destination::from_stored(kind.kind(), config.as_deref()).unwrap();
            assert_eq!(back, kind);
        }
    }

    #[test]
    fn an_unknown_kind_or_a_broken_configuration_is_an_error() {
        assert!(Destination::from_stored("ftp", None).is_err());
        assert!(Destination::from_stored("sqs", None).is_err());
        assert!(Destination::from_stored("sqs", Some("{}")).is_err());
    }
}
