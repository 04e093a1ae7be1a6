//! Delivering to destinations beyond HTTP (RabbitMQ, NATS JetStream, Kafka, SQS, SNS, S3):
//! the attempt is the same signed message an HTTP endpoint gets, published through the
//! destination's [`Sink`], and the broker's answer is judged like an HTTP answer (see
//! [`super::attempt::judge`]): its acknowledgement a `200` whose body is the acknowledgement,
//! its refusal or silence a failed attempt retried on the schedule.
//!
//! A destination's sink keeps its connection between attempts, so sinks are kept per
//! endpoint, built again when the endpoint changes (its `updated_at` moves with every write,
//! a new configuration or new credentials included) and dropped once unused for a while.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookd_core::destination::{AwsAccess, Destination, SECRET_ACCESS_KEY, URI_SECRET};
use hookd_core::model::Endpoint;
use hookd_core::{Clock, EndpointId, Timestamp};
use hookd_sinks::aws::{
    self, AwsContext, S3Config, S3Sink, SnsConfig, SnsSink, SqsConfig, SqsSink,
};
use hookd_sinks::{
    AddressGuard, Batched, KafkaConfig, KafkaSink, NatsConfig, NatsSink, Publication,
    RabbitMqConfig, RabbitMqSink, Sink, SinkError,
};
use hookd_store::ClaimedDelivery;
use hookd_vault::EndpointKeys;
use webhook_signature::header;

use crate::http::{OutgoingRequest, SendError, SendOutcome};

/// How long a destination's sink (and its connection) is kept without an attempt.
const IDLE: Duration = Duration::from_secs(600);

/// The sinks of the destinations the engine has delivered to lately.
pub(super) struct Sinks {
    guard: Arc<dyn AddressGuard>,
    clock: Arc<dyn Clock>,
    kept: Mutex<HashMap<EndpointId, Kept>>,
}

/// One destination's sink, built for the endpoint as it was at `version`.
struct Kept {
    version: Timestamp,
    sink: Arc<dyn Sink>,
    used: Instant,
}

impl Sinks {
    pub(super) fn new(guard: Arc<dyn AddressGuard>, clock: Arc<dyn Clock>) -> Self {
        Self {
            guard,
            clock,
            kept: Mutex::default(),
        }
    }

    /// Publishes the signed `request` of `claimed` to its destination; the outcome as the
    /// attempt log and the verdict read it.
    pub(super) async fn publish(
        &self,
        claimed: &ClaimedDelivery,
        keys: &EndpointKeys,
        request: OutgoingRequest,
    ) -> SendOutcome {
        let started = Instant::now();
        let published = match self.sink(&claimed.endpoint, keys, request.timeout) {
            Ok(sink) => sink.publish(&[publication(claimed, request)]).await,
            Err(error) => Err(error),
        };
        match published {
            Ok(ack) => SendOutcome::acknowledged(ack.summary, started.elapsed()),
            Err(error) => SendOutcome::failed(send_error(error), started.elapsed()),
        }
    }

    /// The endpoint's sink, built now unless one built for this version of it is kept.
    fn sink(
        &self,
        endpoint: &Endpoint,
        keys: &EndpointKeys,
        timeout: Duration,
    ) -> Result<Arc<dyn Sink>, SinkError> {
        let now = Instant::now();
        let mut kept = self.kept.lock().expect("sinks poisoned");
        kept.retain(|_, k| now.duration_since(k.used) < IDLE);
        if let Some(k) = kept.get_mut(&endpoint.id)
            && k.version == endpoint.updated_at
        {
            k.used = now;
            return Ok(k.sink.clone());
        }
        let sink = batched(self.build(endpoint, keys, timeout)?, endpoint, timeout);
        let version = endpoint.updated_at;
        kept.insert(
            endpoint.id.clone(),
            Kept {
                version,
                sink: sink.clone(),
                used: now,
            },
        );
        Ok(sink)
    }

    /// A sink for the endpoint's destination, its credentials taken from its opened keys.
    fn build(
        &self,
        endpoint: &Endpoint,
        keys: &EndpointKeys,
        timeout: Duration,
    ) -> Result<Arc<dyn Sink>, SinkError> {
        let secrets = keys.destination_secrets();
        // A URI with a password is sealed whole; the clear config shows it masked.
        let uri = |shown: &str| secrets.get(URI_SECRET).cloned().unwrap_or(shown.to_owned());
        let guard = self.guard.clone();
        let aws = || AwsContext {
            guard: self.guard.clone(),
            clock: self.clock.clone(),
            timeout,
        };
        let access = |access: &AwsAccess| aws_access(access, secrets.get(SECRET_ACCESS_KEY));
        Ok(match &endpoint.destination {
            Destination::RabbitMq(c) => {
                let config = RabbitMqConfig {
                    uri: uri(&c.uri),
                    routing_key: c.routing_key.clone(),
                    mandatory: c.mandatory,
                };
                Arc::new(RabbitMqSink::new(config, guard)?.with_timeout(timeout))
            }
            Destination::NatsJetStream(c) => {
                let config = NatsConfig {
                    servers: vec![uri(&c.url)],
                    subject: c.subject.clone(),
                };
                Arc::new(NatsSink::new(config, guard)?.with_timeout(timeout))
            }
            Destination::Kafka(c) => {
                let config = KafkaConfig {
                    bootstrap_servers: c.bootstrap_servers.clone(),
                    topic: c.topic.clone(),
                };
                Arc::new(KafkaSink::new(config, guard)?.with_timeout(timeout))
            }
            Destination::Sqs(c) => {
                let config = SqsConfig {
                    queue_url: c.queue_url.clone(),
                    access: access(&c.access)?,
                };
                Arc::new(SqsSink::new(config, aws())?)
            }
            Destination::Sns(c) => {
                let config = SnsConfig {
                    topic_arn: c.topic_arn.clone(),
                    access: access(&c.access)?,
                };
                Arc::new(SnsSink::new(config, aws())?)
            }
            Destination::AmazonS3(c) => {
                let config = S3Config {
                    bucket: c.bucket.clone(),
                    key_prefix: format!("{}/{}/", endpoint.app_id, endpoint.id),
                    access: access(&c.access)?,
                };
                Arc::new(S3Sink::new(config, aws())?)
            }
            Destination::Http | Destination::Fifo | Destination::Polling => {
                return Err(SinkError::Config(format!(
                    "a {} destination is not published to a broker",
                    endpoint.destination.kind()
                )));
            }
        })
    }
}

/// `sink`, its publications gathered into batches when the endpoint asks for them. A batch
/// waits for more at most `maxWaitSecs`, and never longer than an attempt may take.
fn batched(sink: Arc<dyn Sink>, endpoint: &Endpoint, timeout: Duration) -> Arc<dyn Sink> {
    if endpoint.batch_size <= 1 {
        return sink;
    }
    let wait = Duration::from_secs(endpoint.max_wait_secs.into()).min(timeout);
    Arc::new(Batched::new(sink, endpoint.batch_size.into(), wait))
}

/// The credentials an AWS destination signs with: its key id in clear, its secret sealed.
fn aws_access(access: &AwsAccess, secret: Option<&String>) -> Result<aws::AwsAccess, SinkError> {
    let (Some(key_id), Some(secret)) = (&access.access_key_id, secret) else {
        return Err(SinkError::Config(
            "accessKeyId and secretAccessKey are needed to sign requests".into(),
        ));
    };
    Ok(aws::AwsAccess {
        region: access.region.clone(),
        access_key_id: key_id.clone(),
        secret_access_key: secret.clone(),
        endpoint_url: access.endpoint_url.clone(),
    })
}

/// What a destination receives of the signed request: its body and Standard Webhooks
/// headers, with the message's event type and ordering key.
fn publication(claimed: &ClaimedDelivery, request: OutgoingRequest) -> Publication {
    let signed = [header::ID, header::TIMESTAMP, header::SIGNATURE];
    let headers = signed
        .iter()
        .filter_map(|&name| {
            let value = request.headers.get(name)?.to_str().ok()?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect();
    Publication {
        message_id: claimed.message.id.to_string(),
        event_type: claimed.message.event_type.clone(),
        ordering_key: claimed.message.ordering_key.clone(),
        body: request.body,
        headers,
    }
}

/// A sink's failure as the attempt log tells it.
fn send_error(error: SinkError) -> SendError {
    match error {
        SinkError::Connect(why) => SendError::Connect(why),
        SinkError::Refused(why) => SendError::Refused(why),
        SinkError::Timeout => SendError::Timeout,
        rejected_or_config => SendError::Request(rejected_or_config.to_string()),
    }
}
