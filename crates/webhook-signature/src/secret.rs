//! Secrets and keys in their Standard Webhooks text forms: `whsec_` HMAC secrets, `whsk_`
//! ed25519 secret keys and `whpk_` ed25519 public keys. Generating, parsing, printing; the
//! signing and verifying code never sees a string.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_PAD_INDIFFERENT};
use ed25519_dalek::{PUBLIC_KEY_LENGTH, SECRET_KEY_LENGTH};

use crate::KeyError;

/// Prefix of an HMAC secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Prefix of an ed25519 secret key.
pub const ED25519_SECRET_PREFIX: &str = "whsk_";
/// Prefix of an ed25519 public key.
pub const ED25519_PUBLIC_PREFIX: &str = "whpk_";

/// Length in bytes of the secrets [`Secret::generate`] makes.
pub const GENERATED_SECRET_LEN: usize = 32;

/// Fills a buffer from the operating system's random number generator.
fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0; N];
    getrandom::fill(&mut bytes).expect("the operating system's random number generator failed");
    bytes
}

/// Strips `prefix` if present and decodes the rest as padded or unpadded standard base64.
fn decode(text: &str, prefix: &str) -> Result<Vec<u8>, KeyError> {
    let body = text.strip_prefix(prefix).unwrap_or(text);
    if body.is_empty() {
        return Err(KeyError::Empty);
    }
    STANDARD_PAD_INDIFFERENT
        .decode(body)
        .map_err(|_| KeyError::InvalidBase64)
}

/// An HMAC-SHA256 secret (`whsec_…`); the key is the decoded bytes, not the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// Makes a new secret of [`GENERATED_SECRET_LEN`] bytes from the OS random number generator.
    ///
    /// # Panics
    /// If the operating system's random number generator fails.
    pub fn generate() -> Self {
        Self(random_bytes::<GENERATED_SECRET_LEN>().to_vec())
    }

    /// Parses a secret with or without the `whsec_` prefix, padded or not. Accepts any non-empty
    /// length, as receivers must; see [`Secret::parse_endpoint`] for what a sender accepts.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        decode(text, SECRET_PREFIX).map(Self)
    }

    /// Parses a caller-provided endpoint secret: as [`Secret::parse`], and it must decode to
    /// 24..=64 bytes.
    pub fn parse_endpoint(text: &str) -> Result<Self, KeyError> {
        let secret = Self::parse(text)?;
        match secret.0.len() {
            24..=64 => Ok(secret),
            len => Err(KeyError::SecretLength(len)),
        }
    }

    /// Wraps raw key bytes.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Self {
        Self(bytes.into())
    }

    /// The raw HMAC key.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// `whsec_` and padded base64.
impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SECRET_PREFIX}{}", STANDARD.encode(&self.0))
    }
}

/// Never prints the key.
impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

/// An ed25519 secret key (`whsk_` + base64 of the 32-byte seed followed by the 32-byte public
/// key).
#[derive(Clone, PartialEq, Eq)]
pub struct Ed25519SecretKey(pub(crate) ed25519_dalek::SigningKey);

impl Ed25519SecretKey {
    /// Makes a new key pair from the OS random number generator.
    ///
    /// # Panics
    /// If the operating system's random number generator fails.
    pub fn generate() -> Self {
        Self::from_seed(random_bytes())
    }

    /// The key pair a 32-byte seed derives (deterministic; for tests and stored seeds).
    pub fn from_seed(seed: [u8; SECRET_KEY_LENGTH]) -> Self {
        Self(ed25519_dalek::SigningKey::from_bytes(&seed))
    }

    /// Parses a key with or without the `whsk_` prefix, checking that the embedded public key is
    /// the one the seed derives.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let bytes = decode(text, ED25519_SECRET_PREFIX)?;
        let bytes: &[u8; 64] =
            bytes
                .as_slice()
                .try_into()
                .map_err(|_| KeyError::Ed25519Length {
                    kind: "secret key",
                    expected: 64,
                    got: bytes.len(),
                })?;
        ed25519_dalek::SigningKey::from_keypair_bytes(bytes)
            .map(Self)
            .map_err(|_| KeyError::MismatchedKeyPair)
    }

    /// The public key receivers verify with.
    pub fn public_key(&self) -> Ed25519PublicKey {
        Ed25519PublicKey(self.0.verifying_key())
    }
}

/// `whsk_` and padded base64.
impl fmt::Display for Ed25519SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let encoded = STANDARD.encode(self.0.to_keypair_bytes());
        write!(f, "{ED25519_SECRET_PREFIX}{encoded}")
    }
}

/// Prints only the public half.
impl fmt::Debug for Ed25519SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ed25519SecretKey(public: {})", self.public_key())
    }
}

/// An ed25519 public key (`whpk_` + base64 of 32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ed25519PublicKey(pub(crate) ed25519_dalek::VerifyingKey);

impl Ed25519PublicKey {
    /// Parses a key with or without the `whpk_` prefix.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let bytes = decode(text, ED25519_PUBLIC_PREFIX)?;
        let bytes: &[u8; PUBLIC_KEY_LENGTH] =
            bytes
                .as_slice()
                .try_into()
                .map_err(|_| KeyError::Ed25519Length {
                    kind: "public key",
                    expected: PUBLIC_KEY_LENGTH,
                    got: bytes.len(),
                })?;
        ed25519_dalek::VerifyingKey::from_bytes(bytes)
            .map(Self)
            .map_err(|_| KeyError::InvalidPublicKey)
    }
}

/// `whpk_` and padded base64.
impl fmt::Display for Ed25519PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{ED25519_PUBLIC_PREFIX}{}",
            STANDARD.encode(self.0.as_bytes())
        )
    }
}

/// A key a sender signs with: `v1` (HMAC) or `v1a` (ed25519).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SigningKey {
    /// Produces `v1,` entries.
    Hmac(Secret),
    /// Produces `v1a,` entries.
    Ed25519(Ed25519SecretKey),
}

impl SigningKey {
    /// Parses `whsk_…` as ed25519 and anything else as an HMAC secret (`whsec_` optional).
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        if text.starts_with(ED25519_SECRET_PREFIX) {
            Ed25519SecretKey::parse(text).map(Self::Ed25519)
        } else {
            Secret::parse(text).map(Self::Hmac)
        }
    }
}

/// A key a receiver verifies with: an HMAC secret (`v1`) or an ed25519 public key (`v1a`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyingKey {
    /// Checks `v1,` entries.
    Hmac(Secret),
    /// Checks `v1a,` entries.
    Ed25519(Ed25519PublicKey),
}

impl VerifyingKey {
    /// Parses `whpk_…` as an ed25519 public key, `whsk_…` as the public half of a secret key,
    /// and anything else as an HMAC secret (`whsec_` optional).
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        if text.starts_with(ED25519_PUBLIC_PREFIX) {
            Ed25519PublicKey::parse(text).map(Self::Ed25519)
        } else {
            SigningKey::parse(text).map(Self::from)
        }
    }
}

impl From<SigningKey> for VerifyingKey {
    fn from(key: SigningKey) -> Self {
        match key {
            SigningKey::Hmac(secret) => Self::Hmac(secret),
            SigningKey::Ed25519(key) => Self::Ed25519(key.public_key()),
        }
    }
}

macro_rules! impl_from_str {
    ($($ty:ty),*) => {$(
        impl FromStr for $ty {
            type Err = KeyError;
            fn from_str(text: &str) -> Result<Self, KeyError> {
                Self::parse(text)
            }
        }
    )*};
}
impl_from_str!(
    Secret,
    Ed25519SecretKey,
    Ed25519PublicKey,
    SigningKey,
    VerifyingKey
);

macro_rules! impl_from_variant {
    ($($inner:ty => $outer:ident::$variant:ident),*) => {$(
        impl From<$inner> for $outer {
            fn from(key: $inner) -> Self {
                Self::$variant(key)
            }
        }
    )*};
}
impl_from_variant!(
    Secret => SigningKey::Hmac,
    Ed25519SecretKey => SigningKey::Ed25519,
    Secret => VerifyingKey::Hmac,
    Ed25519PublicKey => VerifyingKey::Ed25519
);

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        STANDARD.encode(bytes)
    }

    #[test]
    fn generated_secret_round_trips() {
        let secret = Secret::generate();
        let text = secret.to_string();
        assert!(text.starts_with("whsec_") && text.len() == 6 + 44, "{text}");
        assert_eq!(Secret::parse_endpoint(&text), Ok(secret.clone()));
        assert_ne!(Secret::generate(), secret);
        assert_eq!(format!("{secret:?}"), "Secret(32 bytes)");
    }

    #[test]
    fn secret_prefix_and_padding_are_optional() {
        let bytes = [7u8; 32];
        let padded = b64(&bytes);
        assert!(padded.ends_with('='));
        for text in [
            format!("whsec_{padded}"),
            padded.clone(),
            padded.trim_end_matches('=').to_owned(),
        ] {
            assert_eq!(Secret::parse(&text).unwrap().as_bytes(), bytes, "{text}");
        }
    }

    #[test]
    fn bad_secrets_have_typed_errors() {
        assert_eq!(Secret::parse(""), Err(KeyError::Empty));
        assert_eq!(Secret::parse("whsec_"), Err(KeyError::Empty));
        for bad in [
            "whsec_!!!!",
            "whsec_ab cd",
            "whsec_AAAA===",
            "whsk_AAAA",
            "whsec_A",
        ] {
            assert_eq!(Secret::parse(bad), Err(KeyError::InvalidBase64), "{bad}");
        }
    }

    #[test]
    fn endpoint_secrets_are_24_to_64_bytes() {
        for (len, ok) in [
            (1, false),
            (23, false),
            (24, true),
            (32, true),
            (64, true),
            (65, false),
        ] {
            let result = Secret::parse_endpoint(&format!("whsec_{}", b64(&vec![1; len])));
            assert_eq!(result.is_ok(), ok, "{len}");
            if !ok {
                assert_eq!(result, Err(KeyError::SecretLength(len)));
            }
        }
        assert_eq!(
            KeyError::SecretLength(5).to_string(),
            "secret must decode to 24..=64 bytes, got 5"
        );
        assert_eq!(Secret::parse_endpoint("whsec_"), Err(KeyError::Empty));
    }

    #[test]
    fn ed25519_keys_round_trip() {
        let key = Ed25519SecretKey::generate();
        let text = key.to_string();
        assert!(text.starts_with("whsk_") && text.len() == 5 + 88, "{text}");
        assert_eq!(Ed25519SecretKey::parse(&text), Ok(key.clone()));
        let public = key.public_key().to_string();
        assert!(
            public.starts_with("whpk_") && public.len() == 5 + 44,
            "{public}"
        );
        assert_eq!(Ed25519PublicKey::parse(&public), Ok(key.public_key()));
        assert_eq!(
            format!("{key:?}"),
            format!("Ed25519SecretKey(public: {public})")
        );
    }

    #[test]
    fn bad_ed25519_keys_have_typed_errors() {
        let (a, b) = (Ed25519SecretKey::generate(), Ed25519SecretKey::generate());
        let mut mixed = a.0.to_keypair_bytes();
        mixed[32..].copy_from_slice(b.0.verifying_key().as_bytes());
        assert_eq!(
            Ed25519SecretKey::parse(&format!("whsk_{}", b64(&mixed))),
            Err(KeyError::MismatchedKeyPair)
        );
        assert_eq!(
            Ed25519SecretKey::parse(&format!("whsk_{}", b64(&[0; 32]))),
            Err(KeyError::Ed25519Length {
                kind: "secret key",
                expected: 64,
                got: 32
            })
        );
        assert_eq!(
            Ed25519PublicKey::parse(&format!("whpk_{}", b64(&[0; 64]))),
            Err(KeyError::Ed25519Length {
                kind: "public key",
                expected: 32,
                got: 64
            })
        );
        assert_eq!(Ed25519PublicKey::parse("whpk_"), Err(KeyError::Empty));
        assert_eq!(
            Ed25519SecretKey::parse("whsk_%"),
            Err(KeyError::InvalidBase64)
        );
        // About half of all 32-byte strings are not curve points.
        assert!((0..=255u8).any(|i| {
            Ed25519PublicKey::parse(&b64(&[i; 32])) == Err(KeyError::InvalidPublicKey)
        }));
    }

    #[test]
    fn key_kind_follows_prefix() {
        let secret = Secret::generate();
        let pair = Ed25519SecretKey::generate();
        let public = pair.public_key();
        assert_eq!(
            SigningKey::parse(&secret.to_string()),
            Ok(secret.clone().into())
        );
        assert_eq!(
            SigningKey::parse(&pair.to_string()),
            Ok(pair.clone().into())
        );
        assert!(SigningKey::parse(&public.to_string()).is_err());
        assert_eq!(VerifyingKey::parse(&secret.to_string()), Ok(secret.into()));
        assert_eq!(VerifyingKey::parse(&public.to_string()), Ok(public.into()));
        assert_eq!(VerifyingKey::parse(&pair.to_string()), Ok(public.into()));
        assert_eq!("whpk_".parse::<VerifyingKey>(), Err(KeyError::Empty));
    }
}
