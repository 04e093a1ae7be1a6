//! The Standard Webhooks envelope: `{"type": …, "timestamp": …, "data": <the payload>}`, the
//! payload structure the specification recommends, so that a receiver can route by type and
//! knows when the event happened.
//!
//! hookd builds it for the producer where an application or an event type asks for it
//! (`envelope: true`; off by default, as Svix sends the producer's bytes as they are). It is
//! built once, when the message is accepted, around the producer's bytes as they came: the
//! stored payload is then the envelope, the bytes every receiver gets and every signature
//! covers.

use crate::Timestamp;

/// Where an envelope's payload came from, besides its event type and time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// The message's event type: the envelope's `type`.
    pub event_type: &'a str,
    /// When the event happened: the envelope's `timestamp`.
    pub occurred_at: Timestamp,
    /// A test send: the envelope also carries `"test": true` (see [`TEST_MARK`]).
    pub test: bool,
}

/// The member that marks a test send, at the top level of the delivered JSON object (inside
/// the envelope, or the example's own object): inside the signed body, so a receiver checks it
/// once the signature verified and no one on the way can add or remove it.
pub const TEST_MARK: &str = "test";

impl Envelope<'_> {
    /// `data`, JSON text already checked, inside the envelope: its bytes kept as they are.
    pub fn around(&self, data: &str) -> Vec<u8> {
        let event_type =
            serde_json::to_string(self.event_type).expect("a string serializes to JSON");
        let timestamp = self.occurred_at.to_rfc3339();
        let test = if self.test { r#","test":true"# } else { "" };
        format!(r#"{{"type":{event_type},"timestamp":"{timestamp}","data":{data}{test}}}"#)
            .into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn the_payload_goes_in_data_byte_for_byte() {
        let envelope = Envelope {
            event_type: "order.shipped",
            occurred_at: Timestamp::from_millis(1_794_649_994_141),
            test: false,
        };
        let data = r#"{"orderId": 1003,  "total": 1.50}"#;
        let body = String::from_utf8(envelope.around(data)).unwrap();
        assert_eq!(
            body,
            r#"{"type":"order.shipped","timestamp":"2026-11-14T09:53:14.141Z","data":{"orderId": 1003,  "total": 1.50}}"#
        );
        let parsed: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed["data"], json!({"orderId": 1003, "total": 1.50}));
    }

    #[test]
    fn a_test_send_is_marked_and_an_odd_type_stays_json() {
        let envelope = Envelope {
            event_type: "a\"b",
            occurred_at: Timestamp::from_millis(0),
            test: true,
        };
        let parsed: Value = serde_json::from_slice(&envelope.around("[1]")).unwrap();
        assert_eq!(
            parsed,
            json!({"type": "a\"b", "timestamp": "1970-01-01T00:00:00Z", "data": [1], "test": true})
        );
    }
}
