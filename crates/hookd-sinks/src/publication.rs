//! What a destination receives for one message: the same bytes and signature headers an HTTP
//! endpoint would, so a consumer verifies it with any Standard Webhooks library.

use bytes::Bytes;

/// One message as published to a destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publication {
    /// The message's id (`msg_…`), also its `webhook-id`: a broker's deduplication id where it
    /// has one (SQS FIFO, NATS `Nats-Msg-Id`).
    pub message_id: String,
    /// The event type (`order.shipped`), carried as a header or attribute.
    pub event_type: String,
    /// The ordering key, mapped to the broker's own ordering where it has one (SQS FIFO
    /// `MessageGroupId`, the Kafka record key).
    pub ordering_key: Option<String>,
    /// The payload bytes exactly as the producer sent them.
    pub body: Bytes,
    /// `webhook-id`, `webhook-timestamp`, `webhook-signature`, in that order.
    pub headers: Vec<(String, String)>,
}
