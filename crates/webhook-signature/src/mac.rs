//! HMAC-SHA256 and constant-time comparison in one place, so the Standard Webhooks, Stripe and
//! GitHub schemes cannot drift apart in how they compute or compare a tag.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// HMAC-SHA256 with its key already taken in: the key's inner and outer pads are hashed, so a
/// copy of it tags a message without hashing the key again.
pub(crate) type KeyedHmac = Hmac<Sha256>;

/// `key` taken into HMAC-SHA256.
pub(crate) fn keyed(key: &[u8]) -> KeyedHmac {
    KeyedHmac::new_from_slice(key).expect("HMAC accepts keys of any length")
}

/// HMAC-SHA256 of the concatenation of `parts` (no copy of a large body is made).
pub(crate) fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    tag(keyed(key), parts)
}

/// The tag of the concatenation of `parts` under a keyed state, which it consumes.
pub(crate) fn tag(mut mac: KeyedHmac, parts: &[&[u8]]) -> [u8; 32] {
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
