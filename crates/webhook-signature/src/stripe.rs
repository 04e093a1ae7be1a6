//! The Stripe scheme, `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]`, for receivers of
//! Stripe-style webhooks. Signed content is `{t}.{body}`, keyed with the whole secret string as
//! UTF-8 (not base64-decoded). Unlike Stripe's own library, both sides of the window are checked.

use crate::VerifyError;
use crate::clock::{TimeWindow, parse_timestamp};
use crate::mac::{hmac_sha256, matches_hex};

/// Name of the header.
pub const HEADER: &str = "stripe-signature";

/// A parsed `Stripe-Signature` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeHeader<'a> {
    /// The `t=` element (the first one, if repeated).
    pub timestamp: u64,
    /// Every `v1=` element's hex text; other schemes (`v0=`) are ignored.
    pub signatures: Vec<&'a str>,
}

impl<'a> StripeHeader<'a> {
    /// Parses comma-separated `key=value` elements; a missing `t=` is an error, elements without
    /// `=` are skipped.
    pub fn parse(value: &'a str) -> Result<Self, VerifyError> {
        let mut timestamp = None;
        let mut signatures = Vec::new();
        for (key, value) in value
            .split(',')
            .filter_map(|element| element.trim().split_once('='))
        {
            match key {
                "t" if timestamp.is_none() => timestamp = Some(parse_timestamp(value)?),
                "v1" => signatures.push(value),
                _ => {}
            }
        }
        let timestamp = timestamp.ok_or(VerifyError::MalformedHeader {
            header: HEADER,
            reason: "no t= element",
        })?;
        Ok(Self {
            timestamp,
            signatures,
        })
    }
}

fn tag(secret: &str, timestamp: u64, body: &[u8]) -> [u8; 32] {
    hmac_sha256(
        secret.as_bytes(),
        &[format!("{timestamp}.").as_bytes(), body],
    )
}

/// The header value `t=<timestamp>,v1=<lowercase hex>`.
pub fn sign(secret: &str, timestamp: u64, body: &[u8]) -> String {
    format!(
        "t={timestamp},v1={}",
        hex::encode(tag(secret, timestamp, body))
    )
}

/// Verifies `body` against a `Stripe-Signature` value: the timestamp within `window`, then any
/// `v1` entry matching.
pub fn verify(
    secret: &str,
    header: &str,
    body: &[u8],
    window: &TimeWindow,
) -> Result<(), VerifyError> {
    let parsed = StripeHeader::parse(header)?;
    window.check(parsed.timestamp)?;
    let expected = tag(secret, parsed.timestamp, body);
    if parsed
        .signatures
        .iter()
        .any(|sig| matches_hex(&expected, sig))
    {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}
