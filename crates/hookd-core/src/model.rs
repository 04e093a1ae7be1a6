//! The records hookd keeps, as the storage layer returns them and the API and engine use them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::destination::Destination;
use crate::{AppId, AttemptId, EndpointId, MessageId, Timestamp};

/// Free-form string labels a caller attaches to an application or endpoint.
pub type Metadata = BTreeMap<String, String>;

/// The metadata key (of an endpoint, else of its application) holding the address hookd's
/// e-mail notices go to; the API refuses a value that is not an address.
pub const NOTIFY_EMAIL: &str = "notifyEmail";

/// An application: one of the producer's customers, who owns endpoints and receives messages.
#[derive(Clone, Debug, PartialEq)]
pub struct Application {
    pub id: AppId,
    pub uid: Option<String>,
    pub name: String,
    pub metadata: Metadata,
    /// Deliveries per second across the application's endpoints, if limited.
    pub throttle_rate: Option<u16>,
    /// Its messages go out in the Standard Webhooks envelope (see [`crate::envelope`]).
    pub envelope: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// An endpoint: a URL of an application that receives messages matching its filters.
#[derive(Clone, Debug, PartialEq)]
pub struct Endpoint {
    pub id: EndpointId,
    pub app_id: AppId,
    pub uid: Option<String>,
    pub url: String,
    pub description: String,
    /// Only these event types are delivered; `None` means all.
    pub event_types: Option<Vec<String>>,
    /// Only messages on one of these channels are delivered; `None` means all.
    pub channels: Option<Vec<String>>,
    pub disabled: bool,
    /// Why the endpoint was disabled (by hookd or through the API), while disabled.
    pub disabled_reason: Option<String>,
    /// When it was disabled, while disabled.
    pub disabled_at: Option<Timestamp>,
    /// Deliveries per second to this endpoint, if limited.
    pub throttle_rate: Option<u16>,
    /// This endpoint's attempt timeout in seconds (1..=30), if not the server's default.
    pub timeout_secs: Option<u16>,
    /// At most this many attempts in flight to this endpoint at once (across every process),
    /// if lower than the server's ceiling (`--endpoint-max-concurrency`).
    pub max_concurrency: Option<u16>,
    /// Which of its messages the endpoint receives one at a time, in publish order.
    pub ordering: Ordering,
    pub metadata: Metadata,
    /// Extra headers sent with every delivery (never ones that collide with ours).
    pub headers: BTreeMap<String, String>,
    /// The signing keys (HMAC secrets, ed25519 private keys), sealed: see [`SealedKeys`].
    pub keys: SealedKeys,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// What it delivers to: an HTTP URL unless made through the destination routes.
    pub destination: Destination,
    /// Messages per publication, for destinations that batch (1 for the others).
    pub batch_size: u16,
    /// How long a batch waits to fill, in seconds.
    pub max_wait_secs: u16,
}

impl Endpoint {
    /// The key this endpoint's delivery of a message is ordered under: deliveries that share
    /// one reach the endpoint one at a time, in publish order. `None`: unordered.
    pub fn ordering_key_of(&self, message: &Message) -> Option<String> {
        self.ordering.key_of(message.ordering_key.as_deref())
    }

    /// Whether a message of `event_type` on `channels` is delivered to this endpoint.
    pub fn subscribes_to(&self, event_type: &str, channels: Option<&[String]>) -> bool {
        !self.disabled
            && filters_take(
                self.event_types.as_deref(),
                self.channels.as_deref(),
                event_type,
                channels,
            )
    }
}

/// Which messages an endpoint receives one at a time, in the order they were published.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Ordering {
    /// Messages that share an ordering key, one at a time per key; every other message in
    /// parallel.
    #[default]
    PerKey,
    /// Every message, one at a time: the endpoint receives one stream.
    Strict,
}

impl Ordering {
    /// The ordering key a delivery of a message with `message_key` gets under this ordering.
    /// A strict endpoint's deliveries all share the empty key, which no message can carry
    /// ([`crate::validate::ordering_key`] refuses it).
    pub fn key_of(self, message_key: Option<&str>) -> Option<String> {
        match self {
            Self::PerKey => message_key.map(str::to_owned),
            Self::Strict => Some(String::new()),
        }
    }

    /// The name the API shows: `perKey` or `strict`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PerKey => "perKey",
            Self::Strict => "strict",
        }
    }

    /// The ordering an API name stands for.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "perKey" => Some(Self::PerKey),
            "strict" => Some(Self::Strict),
            _ => None,
        }
    }
}

/// Whether an endpoint's filters take a message of `event_type` on `channels`: without an
/// event-type filter every type, without a channel filter every message, and with a channel
/// filter the messages that share a channel with it.
pub fn filters_take(
    event_types: Option<&[String]>,
    wanted_channels: Option<&[String]>,
    event_type: &str,
    channels: Option<&[String]>,
) -> bool {
    let type_matches = match event_types {
        Some(types) if !types.is_empty() => types.iter().any(|t| t == event_type),
        _ => true,
    };
    let channel_matches = match wanted_channels {
        Some(wanted) if !wanted.is_empty() => {
            channels.is_some_and(|have| have.iter().any(|c| wanted.contains(c)))
        }
        _ => true,
    };
    type_matches && channel_matches
}

/// An endpoint's signing keys as stored: ciphertext sealed under a master key (`hookd-vault`
/// seals and opens it), never a key in the clear. Whoever holds only this and the database
/// holds no secret.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedKeys(String);

impl SealedKeys {
    /// The stored text.
    pub fn from_stored(text: String) -> Self {
        Self(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Short: the ciphertext says nothing useful and fills logs.
impl std::fmt::Debug for SealedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key_id = self.0.split(':').nth(1).unwrap_or("?");
        write!(f, "SealedKeys(key {key_id})")
    }
}

/// An entry of the event-type catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct EventType {
    pub name: String,
    pub description: String,
    pub schemas: Option<serde_json::Value>,
    pub archived: bool,
    pub deprecated: bool,
    pub feature_flag: Option<String>,
    /// Svix's `groupName`: how catalogs group event types.
    pub group_name: Option<String>,
    /// Svix's `featureFlags`, kept and shown as given.
    pub feature_flags: Option<Vec<String>>,
    /// Its messages go out in the Standard Webhooks envelope (see [`crate::envelope`]).
    pub envelope: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A published event. `payload` holds the exact bytes every receiver gets, produced once when
/// the message was accepted (the producer's bytes, or them inside the Standard Webhooks
/// envelope: [`crate::envelope`]) and never re-serialized.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub id: MessageId,
    pub app_id: AppId,
    pub event_type: String,
    pub event_id: Option<String>,
    pub channels: Option<Vec<String>>,
    /// Messages of one application that share this key reach each endpoint one at a time, in
    /// the order they were published (their ids' order).
    pub ordering_key: Option<String>,
    /// Free-form labels to find the message by (Svix's `tags`).
    pub tags: Option<Vec<String>>,
    /// When its deliveries were scheduled to become due (Svix's `deliverAt`), if not at once.
    pub deliver_at: Option<Timestamp>,
    /// `None` once the payload has been expunged.
    pub payload: Option<Vec<u8>>,
    pub created_at: Timestamp,
}

/// Where a message stands with one endpoint. The numbers are Svix's `MessageStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(i16)]
pub enum DeliveryStatus {
    Success = 0,
    Pending = 1,
    Fail = 2,
    Sending = 3,
}

impl DeliveryStatus {
    /// The stored and wire number.
    pub fn code(self) -> i16 {
        self as i16
    }

    /// The status for a stored number; unknown numbers read as pending, the safe side.
    pub fn from_code(code: i64) -> Self {
        match code {
            0 => Self::Success,
            2 => Self::Fail,
            3 => Self::Sending,
            _ => Self::Pending,
        }
    }

    /// Svix's `MessageStatusText`.
    pub fn text(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Pending => "pending",
            Self::Fail => "fail",
            Self::Sending => "sending",
        }
    }
}

/// A message's delivery to one endpoint: the unit the engine schedules and retries.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    pub message_id: MessageId,
    pub endpoint_id: EndpointId,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempt_count: u32,
    /// When the next attempt is due, while pending; `None` while it waits its turn behind an
    /// earlier delivery of its ordering key, and once settled.
    pub next_attempt_at: Option<Timestamp>,
    pub updated_at: Timestamp,
    /// The key this delivery is ordered under (see [`Endpoint::ordering_key_of`]), if any.
    pub ordering_key: Option<String>,
}

impl Delivery {
    /// Whether it waits behind an earlier delivery of its ordering key to the same endpoint.
    pub fn is_waiting(&self) -> bool {
        self.status == DeliveryStatus::Pending && self.next_attempt_at.is_none()
    }
}

/// Why an attempt was made. The numbers are Svix's `MessageAttemptTriggerType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i16)]
pub enum TriggerType {
    Scheduled = 0,
    Manual = 1,
}

impl TriggerType {
    /// The stored and wire number.
    pub fn code(self) -> i16 {
        self as i16
    }

    /// The trigger for a stored number.
    pub fn from_code(code: i64) -> Self {
        if code == 1 {
            Self::Manual
        } else {
            Self::Scheduled
        }
    }
}

/// One HTTP attempt, as the delivery log shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    pub id: AttemptId,
    pub message_id: MessageId,
    pub endpoint_id: EndpointId,
    pub url: String,
    /// The HTTP status, or 0 when no response arrived.
    pub response_status_code: i16,
    /// A capped prefix of the response body, or the error that prevented a response.
    pub response: String,
    /// The response's status line and headers, capped; empty when no response arrived.
    pub response_head: String,
    pub response_duration_ms: i64,
    pub status: DeliveryStatus,
    pub trigger_type: TriggerType,
    pub created_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(event_types: Option<&[&str]>, channels: Option<&[&str]>) -> Endpoint {
        let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        Endpoint {
            id: EndpointId::from_stored("ep_1".into()),
            app_id: AppId::from_stored("app_1".into()),
            uid: None,
            url: "https://example.com/hook".into(),
            description: String::new(),
            event_types: event_types.map(owned),
            channels: channels.map(owned),
            disabled: false,
            disabled_reason: None,
            disabled_at: None,
            throttle_rate: None,
            timeout_secs: None,
            ordering: Default::default(),
            max_concurrency: None,
            metadata: Metadata::new(),
            headers: BTreeMap::new(),
            keys: SealedKeys::from_stored("hk1:x:y".into()),
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(0),
            destination: Default::default(),
            batch_size: 1,
            max_wait_secs: 0,
        }
    }

    #[test]
    fn unfiltered_endpoint_takes_everything() {
        let ep = endpoint(None, None);
        assert!(ep.subscribes_to("order.shipped", None));
        assert!(ep.subscribes_to("order.shipped", Some(&["eu".into()])));
    }

    #[test]
    fn event_type_filter_is_exact() {
        let ep = endpoint(Some(&["order.shipped"]), None);
        assert!(ep.subscribes_to("order.shipped", None));
        assert!(!ep.subscribes_to("order.paid", None));
    }

    #[test]
    fn channel_filter_needs_a_shared_channel() {
        let ep = endpoint(None, Some(&["eu", "us"]));
        assert!(ep.subscribes_to("x", Some(&["us".into()])));
        assert!(!ep.subscribes_to("x", Some(&["apac".into()])));
        assert!(!ep.subscribes_to("x", None));
    }

    #[test]
    fn disabled_endpoint_takes_nothing() {
        let mut ep = endpoint(None, None);
        ep.disabled = true;
        assert!(!ep.subscribes_to("x", None));
    }
}
