//! Verification for receivers: headers, then the timestamp window, then any one signature entry
//! matching any one of the verifier's keys (several keys cover a rotation). Entries of unknown
//! versions or that do not decode are skipped, never fatal.

use ed25519_dalek::Signature;
use ed25519_dalek::ed25519::signature::MultipartVerifier;

use crate::clock::{TimeWindow, parse_timestamp};
use crate::header::{self, V1, V1A, WebhookHeaders};
use crate::mac::{hmac_sha256, matches};
use crate::sign::signed_prefix;
use crate::{VerifyError, VerifyingKey};

/// Checks Standard Webhooks signatures against a set of keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verifier {
    keys: Vec<VerifyingKey>,
    window: TimeWindow,
}

impl Verifier {
    /// A verifier for one key, with the default ±300 s window on the system clock.
    pub fn new(key: impl Into<VerifyingKey>) -> Self {
        Self::with_keys([key.into()])
    }

    /// A verifier accepting a signature by any of `keys`.
    pub fn with_keys(keys: impl IntoIterator<Item = VerifyingKey>) -> Self {
        Self {
            keys: keys.into_iter().collect(),
            window: TimeWindow::default(),
        }
    }

    /// Allows timestamps up to `seconds` away from now in either direction (default 300).
    pub fn tolerance(mut self, seconds: u64) -> Self {
        self.window = self.window.tolerance(seconds);
        self
    }

    /// Uses `unix_seconds` as "now" instead of the system clock.
    pub fn now(mut self, unix_seconds: u64) -> Self {
        self.window = self.window.now(unix_seconds);
        self
    }

    /// Verifies `body` (the raw bytes received) against a request's `(name, value)` headers.
    pub fn verify<K, V>(
        &self,
        body: &[u8],
        headers: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(), VerifyError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        self.verify_headers(body, &WebhookHeaders::from_pairs(headers)?)
    }

    /// Verifies `body` against the three header values.
    pub fn verify_headers(&self, body: &[u8], headers: &WebhookHeaders) -> Result<(), VerifyError> {
        let timestamp = parse_timestamp(&headers.timestamp)?;
        self.window.check(timestamp)?;
        let prefix = signed_prefix(&headers.id, timestamp);
        let content = [prefix.as_bytes(), body];
        let entries: Vec<(&str, Vec<u8>)> = header::entries(&headers.signature)
            .filter(|entry| [V1, V1A].contains(&entry.version))
            .filter_map(|entry| Some((entry.version, entry.decode()?)))
            .collect();
        let signed_by = |key: &VerifyingKey| match key {
            VerifyingKey::Hmac(secret) => {
                let expected = hmac_sha256(secret.as_bytes(), &content);
                entries
                    .iter()
                    .any(|(v, sig)| *v == V1 && matches(&expected, sig))
            }
            VerifyingKey::Ed25519(public) => entries.iter().any(|(v, sig)| {
                *v == V1A
                    && Signature::from_slice(sig)
                        .is_ok_and(|sig| public.0.multipart_verify(&content, &sig).is_ok())
            }),
        };
        if self.keys.iter().any(signed_by) {
            Ok(())
        } else {
            Err(VerifyError::NoMatchingSignature)
        }
    }
}
