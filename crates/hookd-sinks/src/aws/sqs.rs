//! The `sqs` destination: `SendMessage` (AWS JSON 1.0 protocol) to one queue per publication.
//! The message body is the payload text unchanged; the attributes and FIFO ids are described in
//! [`super`]. The delivery log shows `{"messageId": …, "sequenceNumber": …}` (the sequence
//! number on FIFO queues only).

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::client::Call;
use super::reply::unreadable;
use super::{
    Addressee, AwsAccess, AwsContext, OneAtATime, accepted, attributes, fifo_ids, one_by_one,
    payload_text,
};
use crate::{Publication, Published, Sink, SinkError};

/// An `sqs` destination's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqsConfig {
    /// The queue's URL (`https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo`).
    pub queue_url: String,
    /// Region, credentials, and the AWS-compatible endpoint if any.
    pub access: AwsAccess,
}

/// Sends each publication to an SQS queue.
pub struct SqsSink(Addressee);

impl SqsSink {
    /// A sink for `config`'s queue, reached through `context`; nothing is sent yet.
    pub fn new(config: SqsConfig, context: AwsContext) -> Result<Self, SinkError> {
        let addressee = Addressee::new("sqs", config.queue_url, &config.access, context)?;
        Ok(Self(addressee))
    }

    /// The `SendMessage` request's JSON.
    fn request(&self, publication: &Publication) -> Result<Value, SinkError> {
        let attributes: Map<String, Value> = attributes(publication)
            .into_iter()
            .map(|(name, value)| {
                let attribute = json!({ "DataType": "String", "StringValue": value });
                (name.to_owned(), attribute)
            })
            .collect();
        let mut request = json!({
            "QueueUrl": self.0.name,
            "MessageBody": payload_text(publication)?,
            "MessageAttributes": attributes,
        });
        if self.0.fifo {
            let (group, deduplication) = fifo_ids(publication);
            request["MessageGroupId"] = group.into();
            request["MessageDeduplicationId"] = deduplication.into();
        }
        Ok(request)
    }
}

#[async_trait]
impl OneAtATime for SqsSink {
    async fn publish_one(&self, publication: &Publication) -> Result<String, SinkError> {
        let call = Call {
            method: Method::POST,
            url: self.0.client.base().clone(),
            headers: vec![
                ("content-type", "application/x-amz-json-1.0".to_owned()),
                ("x-amz-target", "AmazonSQS.SendMessage".to_owned()),
            ],
            body: self.request(publication)?.to_string().into_bytes(),
        };
        let answer = self.0.client.send(call).await?;
        let reply: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
        let field = |name| reply.get(name).and_then(Value::as_str);
        let message_id =
            field("MessageId").ok_or_else(|| unreadable("SendMessage", "MessageId"))?;
        Ok(accepted(message_id, field("SequenceNumber")))
    }
}

#[async_trait]
impl Sink for SqsSink {
    async fn publish(&self, batch: &[Publication]) -> Result<Published, SinkError> {
        one_by_one(self, batch).await
    }
}
