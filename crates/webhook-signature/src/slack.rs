//! The Slack scheme: `X-Slack-Signature: v0=<hex>` over `v0:{X-Slack-Request-Timestamp}:{body}`,
//! HMAC-SHA256 keyed with the app's signing secret as UTF-8. Slack asks receivers to refuse
//! timestamps more than five minutes away; both sides of the window are checked.

use crate::VerifyError;
use crate::clock::{TimeWindow, parse_timestamp};
use crate::mac::{hmac_sha256, matches_hex};

/// Name of the header carrying the signature.
pub const SIGNATURE: &str = "x-slack-signature";
/// Name of the header carrying the request's unix timestamp.
pub const TIMESTAMP: &str = "x-slack-request-timestamp";

fn tag(secret: &str, timestamp: u64, body: &[u8]) -> [u8; 32] {
    hmac_sha256(
        secret.as_bytes(),
        &[format!("v0:{timestamp}:").as_bytes(), body],
    )
}

/// The `X-Slack-Signature` value `v0=<lowercase hex>` for a request sent at `timestamp`.
pub fn sign(secret: &str, timestamp: u64, body: &[u8]) -> String {
    format!("v0={}", hex::encode(tag(secret, timestamp, body)))
}

/// Verifies `body` against the `X-Slack-Signature` and `X-Slack-Request-Timestamp` values: the
/// timestamp within `window`, then the signature.
pub fn verify(
    secret: &str,
    signature: &str,
    timestamp: &str,
    body: &[u8],
    window: &TimeWindow,
) -> Result<(), VerifyError> {
    let timestamp = parse_timestamp(timestamp)?;
    window.check(timestamp)?;
    let hex_text = signature
        .strip_prefix("v0=")
        .ok_or(VerifyError::MalformedHeader {
            header: SIGNATURE,
            reason: "expected v0=<hex>",
        })?;
    if matches_hex(&tag(secret, timestamp, body), hex_text) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}
