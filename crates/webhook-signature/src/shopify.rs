//! The Shopify scheme, `X-Shopify-Hmac-Sha256: <base64>`: HMAC-SHA256 of the raw body keyed
//! with the app's client secret as UTF-8, in standard padded base64. It has no signed
//! timestamp; receivers deduplicate on `X-Shopify-Event-Id` instead.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_PAD_INDIFFERENT};

use crate::VerifyError;
use crate::mac::{hmac_sha256, matches};

/// Name of the header.
pub const HEADER: &str = "x-shopify-hmac-sha256";

/// The header value: base64 of the tag.
pub fn sign(secret: &str, body: &[u8]) -> String {
    STANDARD.encode(hmac_sha256(secret.as_bytes(), &[body]))
}

/// Verifies `body` against an `X-Shopify-Hmac-Sha256` value.
pub fn verify(secret: &str, header: &str, body: &[u8]) -> Result<(), VerifyError> {
    let candidate =
        STANDARD_PAD_INDIFFERENT
            .decode(header)
            .map_err(|_| VerifyError::MalformedHeader {
                header: HEADER,
                reason: "expected base64",
            })?;
    if matches(&hmac_sha256(secret.as_bytes(), &[body]), &candidate) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}
