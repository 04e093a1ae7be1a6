//! The `sns` destination: `Publish` (AWS query protocol) to one topic per publication. The
//! message is the payload text unchanged; the attributes and FIFO ids are described in
//! [`super`]. The delivery log shows `{"messageId": …, "sequenceNumber": …}` (the sequence
//! number when the topic gives one: FIFO topics).

use async_trait::async_trait;
use reqwest::Method;
use url::form_urlencoded;

use super::client::Call;
use super::reply::{unreadable, xml_text};
use super::{
    Addressee, AwsAccess, AwsContext, OneAtATime, accepted, attributes, fifo_ids, one_by_one,
    payload_text,
};
use crate::{Publication, Published, Sink, SinkError};

/// An `sns` destination's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnsConfig {
    /// The topic's ARN (`arn:aws:sns:us-east-1:123456789012:orders`).
    pub topic_arn: String,
    /// Region, credentials, and the AWS-compatible endpoint if any.
    pub access: AwsAccess,
}

/// Publishes each publication to an SNS topic.
pub struct SnsSink(Addressee);

impl SnsSink {
    /// A sink for `config`'s topic, reached through `context`; nothing is sent yet.
    pub fn new(config: SnsConfig, context: AwsContext) -> Result<Self, SinkError> {
        let addressee = Addressee::new("sns", config.topic_arn, &config.access, context)?;
        Ok(Self(addressee))
    }

    /// The `Publish` request's form.
    fn form(&self, publication: &Publication) -> Result<String, SinkError> {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("Action", "Publish")
            .append_pair("Version", "2010-03-31")
            .append_pair("TopicArn", &self.0.name)
            .append_pair("Message", payload_text(publication)?);
        for (n, (name, value)) in attributes(publication).into_iter().enumerate() {
            let entry = format!("MessageAttributes.entry.{}", n + 1);
            form.append_pair(&format!("{entry}.Name"), name)
                .append_pair(&format!("{entry}.Value.DataType"), "String")
                .append_pair(&format!("{entry}.Value.StringValue"), value);
        }
        if self.0.fifo {
            let (group, deduplication) = fifo_ids(publication);
            form.append_pair("MessageGroupId", group)
                .append_pair("MessageDeduplicationId", deduplication);
        }
        Ok(form.finish())
    }
}

#[async_trait]
impl OneAtATime for SnsSink {
    async fn publish_one(&self, publication: &Publication) -> Result<String, SinkError> {
        let call = Call {
            method: Method::POST,
            url: self.0.client.base().clone(),
            headers: vec![(
                "content-type",
                "application/x-www-form-urlencoded; charset=utf-8".to_owned(),
            )],
            body: self.form(publication)?.into_bytes(),
        };
        let answer = self.0.client.send(call).await?;
        let reply = String::from_utf8_lossy(&answer.body);
        let message_id =
            xml_text(&reply, "MessageId").ok_or_else(|| unreadable("Publish", "MessageId"))?;
        let sequence = xml_text(&reply, "SequenceNumber");
        Ok(accepted(&message_id, sequence.as_deref()))
    }
}

#[async_trait]
impl Sink for SnsSink {
    async fn publish(&self, batch: &[Publication]) -> Result<Published, SinkError> {
        one_by_one(self, batch).await
    }
}
