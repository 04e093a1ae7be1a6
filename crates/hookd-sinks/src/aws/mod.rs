//! Destinations that speak AWS's APIs: an SQS queue, an SNS topic, an S3 bucket, at AWS or at
//! any service with the same API (`endpointUrl`: LocalStack, MinIO, moto, …). They share one
//! transport: SigV4-signed requests over reqwest, sent only to addresses the SSRF guard allows.
//!
//! # What each type receives
//! - [`SqsSink`]: one `SendMessage` per publication; the body is the payload text unchanged.
//! - [`SnsSink`]: one `Publish` per publication; the message is the payload text unchanged.
//! - [`S3Sink`]: one object per batch, a line of JSON per publication (see [`s3`]).
//!
//! SQS and SNS carry these message attributes (type `String`): `webhook-id`,
//! `webhook-timestamp`, `webhook-signature` (so a consumer verifies the body with any Standard
//! Webhooks library), `event-type`, and `ordering-key` when the message has one. A FIFO queue
//! or topic (its name ends in `.fifo`) gets `MessageGroupId` = the ordering key, or
//! [`DEFAULT_GROUP`] for messages without one, and `MessageDeduplicationId` = the `webhook-id`,
//! so a retry within AWS's five-minute deduplication window is not delivered twice.
//!
//! # Failures
//! The SSRF guard's refusal is [`SinkError::Refused`], before anything is sent. A refusal by
//! AWS is [`SinkError::Rejected`] with AWS's error code (`SignatureDoesNotMatch`,
//! `QueueDoesNotExist`, …) and its message, which ends `(HTTP 403)`, or `(HTTP 400,
//! throttled)` / `(HTTP 503, server error)` for refusals that waiting cures. No connection is
//! [`SinkError::Connect`]; no answer within the context's timeout, [`SinkError::Timeout`].
//!
//! # Layout
//! - `client`: the transport: the guard check, the reqwest client pinned to the checked
//!   addresses, one call and its answer or typed failure.
//! - `signing`: SigV4 headers for one request, at the injected clock's time.
//! - `reply`: reading AWS's answers: the error code and message of a refusal (JSON or XML),
//!   and the text of an XML element.
//! - [`sqs`], [`sns`], [`s3`]: the three destination types.

mod client;
mod reply;
pub mod s3;
mod signing;
pub mod sns;
pub mod sqs;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hookd_core::Clock;

use crate::{AddressGuard, Publication, Published, SinkError};

pub use s3::{S3Config, S3Sink};
pub use sns::{SnsConfig, SnsSink};
pub use sqs::{SqsConfig, SqsSink};

/// The `MessageGroupId` of a message without an ordering key on a FIFO queue or topic: such
/// messages form one group, received in the order hookd published them.
pub const DEFAULT_GROUP: &str = "default";

/// Where and as whom a destination calls AWS: the parts of its configuration every AWS type
/// has. Its `Debug` leaves the secret out.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsAccess {
    /// The region requests are signed for and, without `endpoint_url`, sent to
    /// (`us-east-1`).
    pub region: String,
    /// The IAM access key id.
    pub access_key_id: String,
    /// The IAM secret access key.
    pub secret_access_key: String,
    /// An AWS-compatible service to call instead of AWS (`http://127.0.0.1:5000`); S3 is then
    /// addressed path-style (`{endpoint_url}/{bucket}/{key}`).
    pub endpoint_url: Option<String>,
}

impl fmt::Debug for AwsAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsAccess")
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"***")
            .field("endpoint_url", &self.endpoint_url)
            .finish()
    }
}

/// What an AWS destination needs from the engine: the SSRF guard every host passes, the clock
/// requests are signed at, and how long one call may take.
#[derive(Clone)]
pub struct AwsContext {
    /// Resolves and checks the host before every call.
    pub guard: Arc<dyn AddressGuard>,
    /// The signing time (AWS refuses signatures more than 15 minutes off its own clock).
    pub clock: Arc<dyn Clock>,
    /// The limit for one call, connecting included.
    pub timeout: Duration,
}

/// An SQS queue or SNS topic: the service's client, the queue URL or topic ARN, and whether it
/// is FIFO.
struct Addressee {
    client: client::AwsClient,
    name: String,
    fifo: bool,
}

impl Addressee {
    /// `name` at `service`'s regional AWS endpoint, or at the access's `endpoint_url`.
    fn new(
        service: &'static str,
        name: String,
        access: &AwsAccess,
        context: AwsContext,
    ) -> Result<Self, SinkError> {
        let aws_url = |region: &str| format!("https://{service}.{region}.amazonaws.com/");
        Ok(Self {
            client: client::AwsClient::new(service, access, aws_url, context)?,
            fifo: name.ends_with(".fifo"),
            name,
        })
    }
}

/// The message attributes SQS and SNS carry: the Standard Webhooks headers, the event type and
/// the ordering key when there is one.
fn attributes(publication: &Publication) -> Vec<(&str, &str)> {
    let headers = publication
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()));
    let ordering_key = publication
        .ordering_key
        .as_deref()
        .map(|key| ("ordering-key", key));
    headers
        .chain([("event-type", publication.event_type.as_str())])
        .chain(ordering_key)
        .collect()
}

/// `MessageGroupId` and `MessageDeduplicationId` for a FIFO queue or topic.
fn fifo_ids(publication: &Publication) -> (&str, &str) {
    let group = publication.ordering_key.as_deref().unwrap_or(DEFAULT_GROUP);
    (group, publication.message_id.as_str())
}

/// The payload as the text SQS and SNS carry; hookd's payloads are JSON, so UTF-8.
fn payload_text(publication: &Publication) -> Result<&str, SinkError> {
    std::str::from_utf8(&publication.body).map_err(|_| SinkError::Rejected {
        code: "InvalidMessageContents".to_owned(),
        text: format!(
            "the payload of {} is not UTF-8 text",
            publication.message_id
        ),
    })
}

/// The delivery log's record of a message SQS or SNS accepted.
fn accepted(message_id: &str, sequence_number: Option<&str>) -> String {
    let mut summary = serde_json::json!({ "messageId": message_id });
    if let Some(sequence_number) = sequence_number {
        summary["sequenceNumber"] = sequence_number.into();
    }
    summary.to_string()
}

/// A destination whose API takes one message per call (SQS, SNS).
#[async_trait]
trait OneAtATime: Sync {
    /// Publishes one message; the delivery log's record of its acceptance.
    async fn publish_one(&self, publication: &Publication) -> Result<String, SinkError>;
}

/// Publishes `batch` with `sink`, one message at a time, in order; the summary has a line per
/// message. A failure stops there: the whole batch is retried, and what was already sent is
/// sent again (at least once; FIFO deduplication drops the repeat).
async fn one_by_one(sink: &impl OneAtATime, batch: &[Publication]) -> Result<Published, SinkError> {
    let mut lines = Vec::with_capacity(batch.len());
    for publication in batch {
        lines.push(sink.publish_one(publication).await?);
    }
    Ok(Published {
        summary: lines.join("\n"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_debug_leaves_the_secret_out() {
        let access = AwsAccess {
            region: "us-east-1".to_owned(),
            access_key_id: "AKID".to_owned(),
            secret_access_key: "very-secret".to_owned(),
            endpoint_url: None,
        };
        let shown = format!("{access:?}");
        assert!(
            shown.contains("AKID") && !shown.contains("very-secret"),
            "{shown}"
        );
    }
}
