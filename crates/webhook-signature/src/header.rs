//! The three Standard Webhooks headers: finding them among a request's headers (names compare
//! case-insensitively) and splitting `webhook-signature` into its `version,signature` entries.
//! Everything here reads untrusted input and must never panic.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_PAD_INDIFFERENT;

use crate::VerifyError;

/// Name of the header carrying the message id.
pub const ID: &str = "webhook-id";
/// Name of the header carrying the attempt's unix timestamp.
pub const TIMESTAMP: &str = "webhook-timestamp";
/// Name of the header carrying the space-separated signature entries.
pub const SIGNATURE: &str = "webhook-signature";

/// Version tag of HMAC-SHA256 entries.
pub const V1: &str = "v1";
/// Version tag of ed25519 entries.
pub const V1A: &str = "v1a";

/// The values of the three Standard Webhooks headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookHeaders {
    /// `webhook-id`: the message id, the same on every attempt.
    pub id: String,
    /// `webhook-timestamp`: unix seconds of this attempt, as sent.
    pub timestamp: String,
    /// `webhook-signature`: space-separated `version,base64` entries.
    pub signature: String,
}

impl WebhookHeaders {
    /// Picks the three headers out of `(name, value)` pairs, comparing names
    /// case-insensitively; the first of repeated headers wins.
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Result<Self, VerifyError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut found: [Option<String>; 3] = Default::default();
        for (name, value) in pairs {
            let name = name.as_ref();
            if let Some(i) = [ID, TIMESTAMP, SIGNATURE]
                .iter()
                .position(|wanted| name.eq_ignore_ascii_case(wanted))
            {
                found[i].get_or_insert_with(|| value.as_ref().to_owned());
            }
        }
        let [id, timestamp, signature] = found;
        Ok(Self {
            id: id.ok_or(VerifyError::MissingHeader(ID))?,
            timestamp: timestamp.ok_or(VerifyError::MissingHeader(TIMESTAMP))?,
            signature: signature.ok_or(VerifyError::MissingHeader(SIGNATURE))?,
        })
    }

    /// The headers as `(name, value)` pairs, ready to put on a request.
    pub fn pairs(&self) -> [(&'static str, &str); 3] {
        [
            (ID, &self.id),
            (TIMESTAMP, &self.timestamp),
            (SIGNATURE, &self.signature),
        ]
    }
}

/// One `version,signature` entry of a `webhook-signature` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The version tag, e.g. [`V1`] or [`V1A`]; unknown tags are kept for the caller to skip.
    pub version: &'a str,
    /// The base64 signature text.
    pub signature: &'a str,
}

impl Entry<'_> {
    /// The signature bytes, or `None` if the text is not base64.
    pub fn decode(&self) -> Option<Vec<u8>> {
        STANDARD_PAD_INDIFFERENT.decode(self.signature).ok()
    }
}

/// The entries of a `webhook-signature` value, separated by whitespace; pieces without a comma
/// are skipped.
pub fn entries(value: &str) -> impl Iterator<Item = Entry<'_>> {
    value.split_ascii_whitespace().filter_map(|piece| {
        let (version, signature) = piece.split_once(',')?;
        Some(Entry { version, signature })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_are_case_insensitive_and_first_wins() {
        let headers = WebhookHeaders::from_pairs([
            ("Webhook-Id", "a"),
            ("WEBHOOK-TIMESTAMP", "1"),
            ("webhook-signature", "v1,x"),
            ("webhook-id", "b"),
            ("content-type", "c"),
        ])
        .unwrap();
        assert_eq!(
            (headers.id.as_str(), headers.timestamp.as_str()),
            ("a", "1")
        );
        assert_eq!(headers.signature, "v1,x");
    }

    #[test]
    fn each_missing_header_is_named() {
        let all = [(ID, "a"), (TIMESTAMP, "1"), (SIGNATURE, "v1,x")];
        for (i, (name, _)) in all.iter().enumerate() {
            let rest = all
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, p)| *p);
            let err = WebhookHeaders::from_pairs(rest).unwrap_err();
            assert_eq!(err, VerifyError::MissingHeader(name));
            assert_eq!(err.to_string(), format!("missing header {name}"));
        }
    }

    #[test]
    fn entries_split_on_whitespace_and_skip_pieces_without_comma() {
        let parsed: Vec<_> = entries("  v1,abc  junk\tv1a,d,e v2, ,").collect();
        let expected = [("v1", "abc"), ("v1a", "d,e"), ("v2", ""), ("", "")];
        let parsed: Vec<_> = parsed.iter().map(|e| (e.version, e.signature)).collect();
        assert_eq!(parsed, expected);
        assert_eq!(entries("v1,").next().unwrap().decode(), Some(vec![]));
        assert_eq!(entries("v1,!!").next().unwrap().decode(), None);
        assert_eq!(entries("v1,AAE").next().unwrap().decode(), Some(vec![0, 1]));
        assert_eq!(
            entries("v1,AAE=").next().unwrap().decode(),
            Some(vec![0, 1])
        );
    }
}
