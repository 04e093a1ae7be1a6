//! The GitHub scheme, `X-Hub-Signature-256: sha256=<hex>`: HMAC-SHA256 of the raw body keyed
//! with the secret string as UTF-8. It has no timestamp; receivers deduplicate on
//! `X-GitHub-Delivery` instead.

use crate::VerifyError;
use crate::mac::{hmac_sha256, matches_hex};

/// Name of the header.
pub const HEADER: &str = "x-hub-signature-256";

/// The header value `sha256=<lowercase hex>`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(hmac_sha256(secret.as_bytes(), &[body]))
    )
}

/// Verifies `body` against an `X-Hub-Signature-256` value.
pub fn verify(secret: &str, header: &str, body: &[u8]) -> Result<(), VerifyError> {
    let hex_text = header
        .strip_prefix("sha256=")
        .ok_or(VerifyError::MalformedHeader {
            header: HEADER,
            reason: "expected sha256=<hex>",
        })?;
    if matches_hex(&hmac_sha256(secret.as_bytes(), &[body]), hex_text) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}
