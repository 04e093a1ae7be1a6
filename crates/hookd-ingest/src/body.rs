//! The few fields read from a verified JSON body (never before its signature is checked), and
//! providers' event types made into event-type names hookd accepts.

use serde::Deserialize;
use serde_json::Value;

/// Longest event-type name hookd accepts.
const MAX_EVENT_TYPE_LEN: usize = 256;

/// The top-level fields providers put their event's id and type in. Only these are kept; the
/// rest of the body is skipped, however large.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Envelope {
    id: Option<Value>,
    #[serde(rename = "type")]
    kind: Option<Value>,
    event_id: Option<Value>,
    event: Option<Value>,
    challenge: Option<Value>,
}

impl Envelope {
    /// The envelope of a JSON object body; empty for any other body (a form, a JSON array, bytes
    /// that are not JSON, an object repeating one of these keys).
    pub(crate) fn read(body: &[u8]) -> Self {
        serde_json::from_slice(body).unwrap_or_default()
    }

    /// `id` (Stripe's event id).
    pub(crate) fn id(&self) -> Option<&str> {
        self.id.as_ref().and_then(Value::as_str)
    }

    /// `type`.
    pub(crate) fn kind(&self) -> Option<&str> {
        self.kind.as_ref().and_then(Value::as_str)
    }

    /// `event_id` (Slack's).
    pub(crate) fn event_id(&self) -> Option<&str> {
        self.event_id.as_ref().and_then(Value::as_str)
    }

    /// `event.type` (the inner event of Slack's `event_callback`).
    pub(crate) fn inner_kind(&self) -> Option<&str> {
        self.event.as_ref()?.get("type")?.as_str()
    }

    /// `challenge` (Slack's `url_verification`).
    pub(crate) fn challenge(&self) -> Option<&str> {
        self.challenge.as_ref().and_then(Value::as_str)
    }
}

/// `provided` as an event-type name hookd accepts: characters outside `[A-Za-z0-9._-]` become
/// `.`, and it is cut to 256; `fallback` (the source's type) when nothing is provided.
pub(crate) fn event_type(provided: Option<&str>, fallback: &str) -> String {
    match provided.filter(|text| !text.is_empty()) {
        Some(text) => text
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '.'
                }
            })
            .take(MAX_EVENT_TYPE_LEN)
            .collect(),
        None => fallback.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_reads_string_fields_of_an_object_only() {
        let envelope = Envelope::read(
            br#"{"id":"evt_1","type":"charge.succeeded","data":{"id":"ch_1","type":"x"},"event":{"type":"message"}}"#,
        );
        assert_eq!(envelope.id(), Some("evt_1"));
        assert_eq!(envelope.kind(), Some("charge.succeeded"));
        assert_eq!(envelope.inner_kind(), Some("message"));
        assert_eq!(envelope.event_id(), None);
        let numbers = Envelope::read(br#"{"id":1,"type":["a"],"event":"x"}"#);
        assert_eq!(
            (numbers.id(), numbers.kind(), numbers.inner_kind()),
            (None, None, None)
        );
        for other in [
            &b"token=a&type=b"[..],
            b"[1]",
            b"",
            b"\xff",
            br#"{"id":"a","id":"b"}"#,
        ] {
            assert_eq!(Envelope::read(other).id(), None);
        }
    }

    #[test]
    fn event_types_become_hookd_names() {
        assert_eq!(
            event_type(Some("orders/create"), "shopify"),
            "orders.create"
        );
        assert_eq!(
            event_type(Some("payment_intent.succeeded"), "stripe"),
            "payment_intent.succeeded"
        );
        assert_eq!(event_type(Some("a b\u{e9}c"), "x"), "a.b.c");
        assert_eq!(event_type(Some(""), "slack"), "slack");
        assert_eq!(event_type(None, "svix"), "svix");
        assert_eq!(event_type(Some(&"é".repeat(300)), "x"), ".".repeat(256));
    }
}
