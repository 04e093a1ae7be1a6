//! Property tests: signing then verifying round-trips for any body, id, timestamp and key, and
//! any single change to what was signed fails. Also: no parser panics on arbitrary input (the
//! same calls the `fuzz/` targets make, so CI covers them without a nightly toolchain).

use proptest::prelude::*;
use webhook_signature::{
    Ed25519SecretKey, Secret, Signer, SigningKey, TimeWindow, Verifier, VerifyError, VerifyingKey,
    WebhookHeaders, github, header, stripe,
};

/// A key of either kind, from raw bytes so proptest can shrink it.
#[derive(Debug, Clone)]
enum KeyBytes {
    Hmac(Vec<u8>),
    Ed25519([u8; 32]),
}

impl KeyBytes {
    fn key(&self) -> SigningKey {
        match self {
            Self::Hmac(bytes) => SigningKey::Hmac(Secret::from_bytes(bytes.clone())),
            Self::Ed25519(seed) => SigningKey::Ed25519(Ed25519SecretKey::from_seed(*seed)),
        }
    }

    /// The same key with one byte changed.
    fn tweak(&self, index: usize, xor: u8) -> Self {
        let mut tweaked = self.clone();
        let bytes: &mut [u8] = match &mut tweaked {
            Self::Hmac(bytes) => bytes,
            Self::Ed25519(seed) => seed,
        };
        let i = index % bytes.len();
        bytes[i] ^= xor;
        tweaked
    }
}

fn key_bytes() -> impl Strategy<Value = KeyBytes> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 24..=64).prop_map(KeyBytes::Hmac),
        any::<[u8; 32]>().prop_map(KeyBytes::Ed25519),
    ]
}

/// Raw bytes, or text with non-ASCII characters; both may be empty.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        "\\PC{0,100}".prop_map(String::into_bytes),
    ]
}

fn id() -> impl Strategy<Value = String> {
    "[^.]{1,40}"
}

fn verify(
    key: &KeyBytes,
    headers: &WebhookHeaders,
    body: &[u8],
    now: u64,
) -> Result<(), VerifyError> {
    Verifier::new(VerifyingKey::from(key.key()))
        .now(now)
        .verify_headers(body, headers)
}

/// Header strings biased toward the shapes parsers care about.
fn header_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "((v1a?|v2|t|v0|sha256|)[,= ]{0,2}[A-Za-z0-9+/=_-]{0,90}[, \t]?){0,5}",
    ]
}

proptest! {
    #[test]
    fn sign_then_verify_round_trips(key in key_bytes(), id in id(), ts in 0..4_000_000_000u64, body in body()) {
        let headers = Signer::from(key.key()).headers(&id, ts, &body).unwrap();
        prop_assert_eq!(verify(&key, &headers, &body, ts), Ok(()));
        prop_assert_eq!(
            Verifier::new(VerifyingKey::from(key.key())).now(ts).verify(&body, headers.pairs()),
            Ok(())
        );
    }

    #[test]
    fn any_single_change_fails(
        key in key_bytes(), id in id(), ts in 1000..4_000_000_000u64, body in body(),
        index in any::<usize>(), xor in 1..=255u8, shift in prop_oneof![-300..=-1i64, 1..=300i64],
    ) {
        let headers = Signer::from(key.key()).headers(&id, ts, &body).unwrap();
        let fails = |headers: &WebhookHeaders, body: &[u8], key: &KeyBytes| {
            verify(key, headers, body, ts) == Err(VerifyError::NoMatchingSignature)
        };

        let mut changed = body.clone();
        match changed.len() {
            0 => changed.push(xor),
            len => changed[index % len] ^= xor,
        }
        prop_assert!(fails(&headers, &changed, &key), "body");

        let mut chars: Vec<char> = id.chars().collect();
        let i = index % chars.len();
        chars[i] = if chars[i] == 'a' { 'b' } else { 'a' };
        let changed_id = WebhookHeaders { id: chars.into_iter().collect(), ..headers.clone() };
        prop_assert!(fails(&changed_id, &body, &key), "id");

        let changed_ts = WebhookHeaders { timestamp: ts.saturating_add_signed(shift).to_string(), ..headers.clone() };
        prop_assert!(fails(&changed_ts, &body, &key), "timestamp");

        prop_assert!(fails(&headers, &body, &key.tweak(index, xor)), "key");
    }

    #[test]
    fn verifiers_never_panic(id in header_text(), ts in header_text(), sig in header_text(), body in body()) {
        let verifier = Verifier::with_keys([
            VerifyingKey::Hmac(Secret::from_bytes(*b"0123456789abcdef01234567")),
            VerifyingKey::from(SigningKey::Ed25519(Ed25519SecretKey::from_seed([9; 32]))),
        ]);
        let headers = [(header::ID, &id), (header::TIMESTAMP, &ts), (header::SIGNATURE, &sig)];
        let result = verifier.verify(&body, headers);
        prop_assert!(result.is_err() || ts.parse::<u64>().is_ok());
        for entry in header::entries(&sig) {
            let _ = entry.decode();
        }
        let _ = stripe::StripeHeader::parse(&sig);
        let _ = stripe::verify(&id, &sig, &body, &TimeWindow::default());
        let _ = github::verify(&id, &sig, &body);
    }

    #[test]
    fn key_parsers_never_panic(text in header_text(), prefix in "(whsec_|whsk_|whpk_|)") {
        let text = format!("{prefix}{text}");
        let _ = Secret::parse_endpoint(&text);
        let _ = VerifyingKey::parse(&text);
        let _ = Ed25519SecretKey::parse(&text);
    }
}
