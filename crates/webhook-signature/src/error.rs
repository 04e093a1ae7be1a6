//! Typed errors, one enum per job (reading keys, signing, verifying), so a caller can match on
//! the exact check that failed and a person reading the message knows which one it was.

use thiserror::Error;

/// A secret or key string could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    /// The string (after any `whsec_`/`whsk_`/`whpk_` prefix) is empty.
    #[error("secret is empty")]
    Empty,
    /// The string is not standard base64 (padded or unpadded).
    #[error("secret is not valid base64")]
    InvalidBase64,
    /// An endpoint secret must decode to 24..=64 bytes.
    #[error("secret must decode to 24..=64 bytes, got {0}")]
    SecretLength(usize),
    /// An ed25519 key decoded to the wrong number of bytes.
    #[error("ed25519 {kind} must decode to {expected} bytes, got {got}")]
    Ed25519Length {
        /// `"secret key"` or `"public key"`.
        kind: &'static str,
        /// 64 for a `whsk_` key, 32 for a `whpk_` key.
        expected: usize,
        /// What the string decoded to.
        got: usize,
    },
    /// The public half of a `whsk_` key is not the one its seed derives.
    #[error("ed25519 secret key's embedded public key does not match its seed")]
    MismatchedKeyPair,
    /// The 32 bytes of a `whpk_` key are not a point on the curve.
    #[error("ed25519 public key is not a valid curve point")]
    InvalidPublicKey,
}

/// A message could not be signed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SignError {
    /// The message id is empty.
    #[error("message id is empty")]
    EmptyId,
    /// The message id contains `.`, which the signed content uses as its separator.
    #[error("message id must not contain '.'")]
    IdContainsDot,
    /// A signer with no keys cannot produce a signature header.
    #[error("no signing keys")]
    NoKeys,
}

/// A webhook failed verification; the variant names the check that failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VerifyError {
    /// A required header is absent (the header's name is given).
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    /// A header is present but not in its expected shape.
    #[error("malformed header {header}: {reason}")]
    MalformedHeader {
        /// The header's name.
        header: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The timestamp is not a plain non-negative integer of unix seconds.
    #[error("invalid timestamp: expected integer unix seconds")]
    InvalidTimestamp,
    /// The timestamp is further in the past than the tolerance allows.
    #[error("timestamp too old: {timestamp} is more than {tolerance} s before now ({now})")]
    TimestampTooOld {
        /// The message's timestamp.
        timestamp: u64,
        /// The verifier's current time.
        now: u64,
        /// The allowed distance in seconds.
        tolerance: u64,
    },
    /// The timestamp is further in the future than the tolerance allows.
    #[error("timestamp too new: {timestamp} is more than {tolerance} s after now ({now})")]
    TimestampTooNew {
        /// The message's timestamp.
        timestamp: u64,
        /// The verifier's current time.
        now: u64,
        /// The allowed distance in seconds.
        tolerance: u64,
    },
    /// No signature entry matched any of the verifier's keys.
    #[error("no matching signature")]
    NoMatchingSignature,
}
