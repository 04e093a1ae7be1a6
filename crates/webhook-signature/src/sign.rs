//! Signing for senders: a message's signed content `{id}.{timestamp}.{body}`, one
//! `webhook-signature` entry per key, and a [`Signer`] holding every key active for an
//! endpoint so that old and new keys both sign during a rotation.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::ed25519::signature::MultipartSigner;

use crate::header::{V1, V1A, WebhookHeaders};
use crate::mac::{KeyedHmac, keyed, tag};
use crate::{Ed25519SecretKey, SignError, SigningKey};

/// The signed content before the body, `{id}.{timestamp}.`; signer and verifier share it.
/// Written piece by piece: every attempt signs, and `format!` costs more than the copying.
pub(crate) fn signed_prefix(id: &str, timestamp: u64) -> String {
    let mut digits = itoa::Buffer::new();
    let timestamp = digits.format(timestamp);
    let mut prefix = String::with_capacity(id.len() + timestamp.len() + 2);
    prefix.push_str(id);
    prefix.push('.');
    prefix.push_str(timestamp);
    prefix.push('.');
    prefix
}

impl SigningKey {
    /// One header entry, `v1,<base64>` or `v1a,<base64>`, for a message.
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> Result<String, SignError> {
        let prefix = checked_prefix(id, timestamp)?;
        let mut entry = String::new();
        ReadyKey::from(self).push_entry(&[prefix.as_bytes(), body], &mut entry);
        Ok(entry)
    }
}

/// A [`SigningKey`] made ready to sign many messages: an HMAC key is taken into HMAC once (its
/// inner and outer pads hashed), and each signature starts from a copy of that state instead of
/// hashing the key again. Worth keeping for as long as the key signs.
#[derive(Clone)]
pub struct ReadyKey(Ready);

#[derive(Clone)]
enum Ready {
    Hmac(KeyedHmac),
    Ed25519(Ed25519SecretKey),
}

impl From<&SigningKey> for ReadyKey {
    fn from(key: &SigningKey) -> Self {
        Self(match key {
            SigningKey::Hmac(secret) => Ready::Hmac(keyed(secret.as_bytes())),
            SigningKey::Ed25519(key) => Ready::Ed25519(key.clone()),
        })
    }
}

impl From<SigningKey> for ReadyKey {
    fn from(key: SigningKey) -> Self {
        Self::from(&key)
    }
}

/// Never prints the key, only its scheme.
impl std::fmt::Debug for ReadyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = match self.0 {
            Ready::Hmac(_) => V1,
            Ready::Ed25519(_) => V1A,
        };
        write!(f, "ReadyKey({scheme})")
    }
}

impl ReadyKey {
    /// Appends this key's entry, `v1,<base64>` or `v1a,<base64>`, for `content` to `out`.
    fn push_entry(&self, content: &[&[u8]], out: &mut String) {
        match &self.0 {
            Ready::Hmac(mac) => {
                out.push_str(V1);
                out.push(',');
                STANDARD.encode_string(tag(mac.clone(), content), out);
            }
            Ready::Ed25519(key) => {
                out.push_str(V1A);
                out.push(',');
                STANDARD.encode_string(key.0.multipart_sign(content).to_bytes(), out);
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
#[derive(Debug, Clone)]
pub struct Signer {
    keys: Vec<ReadyKey>,
}

impl Signer {
    /// A signer for these keys, in the order their entries should appear.
    pub fn new(keys: impl IntoIterator<Item = SigningKey>) -> Self {
        Self::from_ready(keys.into_iter().map(ReadyKey::from))
    }

    /// A signer for keys already made ready, in the order their entries should appear.
    pub fn from_ready(keys: impl IntoIterator<Item = ReadyKey>) -> Self {
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
        // One entry is `v1a,` and 88 base64 characters at most, and a space between two.
        let mut header = String::with_capacity(self.keys.len() * 93);
        for (index, key) in self.keys.iter().enumerate() {
            if index > 0 {
                header.push(' ');
            }
            key.push_entry(&content, &mut header);
        }
        Ok(header)
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
