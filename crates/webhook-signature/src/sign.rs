//! Signing for senders: a message's signed content `{id}.{timestamp}.{body}`, one
//! `webhook-signature` entry per key, and a [`Signer`] holding every key active for an
//! endpoint so that old and new keys both sign during a rotation.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::ed25519::signature::MultipartSigner;

use crate::header::{V1, V1A, WebhookHeaders};
use crate::mac::hmac_sha256;
use crate::{SignError, SigningKey};

/// The signed content before the body, `{id}.{timestamp}.`; signer and verifier share it.
pub(crate) fn signed_prefix(id: &str, timestamp: u64) -> String {
    format!("{id}.{timestamp}.")
}

impl SigningKey {
    /// One header entry, `v1,<base64>` or `v1a,<base64>`, for a message.
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> Result<String, SignError> {
        let prefix = checked_prefix(id, timestamp)?;
        Ok(self.entry(&[prefix.as_bytes(), body]))
    }

    fn entry(&self, content: &[&[u8]]) -> String {
        match self {
            Self::Hmac(secret) => {
                format!(
                    "{V1},{}",
                    STANDARD.encode(hmac_sha256(secret.as_bytes(), content))
                )
            }
            Self::Ed25519(key) => {
                let signature = key.0.multipart_sign(content);
                format!("{V1A},{}", STANDARD.encode(signature.to_bytes()))
            }
        }
    }
}

/// The signed-content prefix, refusing ids the spec forbids.
fn checked_prefix(id: &str, timestamp: u64) -> Result<String, SignError> {
    if id.is_empty() {
        Err(SignError::EmptyId)
    } else if id.contains('.') {
        Err(SignError::IdContainsDot)
    } else {
        Ok(signed_prefix(id, timestamp))
    }
}

/// Every key currently signing for one endpoint; each produces one entry of the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    keys: Vec<SigningKey>,
}

impl Signer {
    /// A signer for these keys, in the order their entries should appear.
    pub fn new(keys: impl IntoIterator<Item = SigningKey>) -> Self {
        Self {
            keys: keys.into_iter().collect(),
        }
    }

    /// The `webhook-signature` value: one entry per key, separated by spaces.
    pub fn signature(&self, id: &str, timestamp: u64, body: &[u8]) -> Result<String, SignError> {
        if self.keys.is_empty() {
            return Err(SignError::NoKeys);
        }
        let prefix = checked_prefix(id, timestamp)?;
        let content = [prefix.as_bytes(), body];
        let entries: Vec<String> = self.keys.iter().map(|key| key.entry(&content)).collect();
        Ok(entries.join(" "))
    }

    /// All three headers for one delivery attempt.
    pub fn headers(
        &self,
        id: &str,
        timestamp: u64,
        body: &[u8],
    ) -> Result<WebhookHeaders, SignError> {
        Ok(WebhookHeaders {
            signature: self.signature(id, timestamp, body)?,
            id: id.to_owned(),
            timestamp: timestamp.to_string(),
        })
    }
}

impl From<SigningKey> for Signer {
    fn from(key: SigningKey) -> Self {
        Self::new([key])
    }
}
