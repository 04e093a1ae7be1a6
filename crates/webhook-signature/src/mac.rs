//! HMAC-SHA256 and constant-time comparison in one place, so the Standard Webhooks, Stripe and
//! GitHub schemes cannot drift apart in how they compute or compare a tag.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// HMAC-SHA256 of the concatenation of `parts` (no copy of a large body is made).
pub(crate) fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256>>::new_from_slice(key).expect("HMAC accepts keys of any length");
    parts.iter().for_each(|part| mac.update(part));
    mac.finalize().into_bytes().into()
}

/// Whether `candidate` equals `expected`, in time independent of their contents.
pub(crate) fn matches(expected: &[u8], candidate: &[u8]) -> bool {
    expected.ct_eq(candidate).into()
}

/// Whether `hex_text` is the hex encoding (either case) of `expected`.
pub(crate) fn matches_hex(expected: &[u8], hex_text: &str) -> bool {
    hex::decode(hex_text).is_ok_and(|candidate| matches(expected, &candidate))
}
