//! Master keys and sealing: XChaCha20-Poly1305 with a random 24-byte nonce per value, the id
//! of the sealing key in front of every ciphertext, and the record it belongs to bound in as
//! associated data (a ciphertext copied onto another record does not open).
//!
//! A [`Keyring`] holds the current master key (which seals) and older ones (which still open
//! what they sealed until it is sealed again): that is what makes rotating the master key a
//! matter of adding a key and re-sealing, with nothing unreadable in between.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::VaultError;

/// The start of every sealed value: format version 1, then `{key id}:{base64url(nonce ‖ ciphertext)}`.
pub const SEALED_PREFIX: &str = "hk1:";

const NONCE_LEN: usize = 24;
const KEY_LEN: usize = 32;

/// One 256-bit master key and its id (the first 8 hex digits of its SHA-256: enough to tell
/// keys apart, nothing about the key).
#[derive(Clone)]
pub struct MasterKey {
    id: String,
    key: [u8; KEY_LEN],
}

impl MasterKey {
    /// A new key from the operating system's random number generator.
    ///
    /// # Panics
    /// If the operating system's random number generator fails.
    pub fn generate() -> Self {
        let mut key = [0u8; KEY_LEN];
        getrandom::fill(&mut key).expect("the operating system's random number generator failed");
        Self::from_bytes(key)
    }

    /// The key with these bytes.
    pub fn from_bytes(key: [u8; KEY_LEN]) -> Self {
        let id = hex::encode(&Sha256::digest(key)[..4]);
        Self { id, key }
    }

    /// Parses the standard-base64 text of 32 bytes, as a key file line holds it.
    pub fn parse(text: &str) -> Result<Self, VaultError> {
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|_| VaultError::BadMasterKey("a key is not valid base64".into()))?;
        let key: [u8; KEY_LEN] = bytes.as_slice().try_into().map_err(|_| {
            VaultError::BadMasterKey(format!(
                "a key must be {KEY_LEN} bytes of base64, got {}",
                bytes.len()
            ))
        })?;
        Ok(Self::from_bytes(key))
    }

    /// The key's id, as it appears on what it sealed.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The base64 text of the key, as a key file holds it.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.key)
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&self.key.into())
    }
}

/// A keyed digest of a signing key: HMAC-SHA256, under a key derived from a master key, of the
/// key's text. The store keeps digests to find a key (one already used by another endpoint,
/// one already shown) without keeping the key; without the master key a digest says nothing
/// of it, not even which keys are weak guesses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyDigest {
    /// The id of the master key it was made under.
    pub key_id: String,
    /// The digest, hex.
    pub hex: String,
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256>>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// Never prints the key.
impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MasterKey({})", self.id)
    }
}

/// The master keys a process holds: the first seals, every one opens what it sealed.
#[derive(Clone, Debug)]
pub struct Keyring {
    keys: Vec<MasterKey>,
}

impl Keyring {
    /// A keyring whose current key is the first of `keys`.
    pub fn new(keys: Vec<MasterKey>) -> Result<Self, VaultError> {
        if keys.is_empty() {
            return Err(VaultError::BadMasterKey("no master key given".into()));
        }
        Ok(Self { keys })
    }

    /// A keyring with one new random key that lives only in memory: what it seals is
    /// unreadable once the process ends. For tests; `hookd serve` always loads or creates a
    /// key file.
    pub fn ephemeral() -> Self {
        Self {
            keys: vec![MasterKey::generate()],
        }
    }

    /// Parses a key file: one base64 key per line, the current one first; blank lines and
    /// `#` comments are skipped.
    pub fn parse(text: &str) -> Result<Self, VaultError> {
        let keys = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(MasterKey::parse)
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(keys)
    }

    /// The key file text for this keyring.
    pub fn to_file_text(&self) -> String {
        let mut text = String::from(
            "# hookd master keys: base64, one per line. The first seals; the others only open\n\
             # what they sealed earlier. Keep this file secret and backed up: without it the\n\
             # endpoint secrets in the database cannot be read.\n",
        );
        for key in &self.keys {
            text.push_str(&key.to_base64());
            text.push('\n');
        }
        text
    }

    /// This keyring with a new random key in front (sealing from now on), the others kept.
    pub fn rotated(&self) -> Self {
        let mut keys = vec![MasterKey::generate()];
        keys.extend(self.keys.iter().cloned());
        Self { keys }
    }

    /// Only the current key (after everything was sealed again under it).
    pub fn current_only(&self) -> Self {
        Self {
            keys: vec![self.keys[0].clone()],
        }
    }

    /// The id of the key that seals.
    pub fn current_id(&self) -> &str {
        self.keys[0].id()
    }

    /// Every key's id, the current one first.
    pub fn ids(&self) -> Vec<&str> {
        self.keys.iter().map(MasterKey::id).collect()
    }

    /// Seals `plaintext` under the current key, bound to `context` (the record it belongs to).
    pub fn seal(&self, context: &str, plaintext: &[u8]) -> String {
        let key = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).expect("the operating system's random number generator failed");
        let ciphertext = key
            .cipher()
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: plaintext,
                    aad: context.as_bytes(),
                },
            )
            .expect("XChaCha20-Poly1305 seals any length hookd stores");
        let mut body = nonce.to_vec();
        body.extend_from_slice(&ciphertext);
        format!(
            "{SEALED_PREFIX}{}:{}",
            key.id(),
            URL_SAFE_NO_PAD.encode(body)
        )
    }

    /// The digest of the signing key whose text is `key` under the current master key.
    pub fn digest(&self, key: &str) -> KeyDigest {
        let master = &self.keys[0];
        // A key of its own, so a digest can never be confused with anything else the master
        // key makes.
        let digest_key = hmac_sha256(&master.key, b"hookd signing key digest v1");
        KeyDigest {
            key_id: master.id.clone(),
            hex: hex::encode(hmac_sha256(&digest_key, key.as_bytes())),
        }
    }

    /// Opens what [`Keyring::seal`] sealed for the same `context`.
    pub fn unseal(&self, context: &str, sealed: &str) -> Result<Vec<u8>, VaultError> {
        let id = sealed_key_id(sealed)?;
        let key = self
            .keys
            .iter()
            .find(|k| k.id() == id)
            .ok_or_else(|| VaultError::UnknownKey(id.to_owned()))?;
        let body = URL_SAFE_NO_PAD
            .decode(&sealed[SEALED_PREFIX.len() + id.len() + 1..])
            .map_err(|_| VaultError::Malformed("the ciphertext is not base64url".into()))?;
        if body.len() < NONCE_LEN {
            return Err(VaultError::Malformed("the ciphertext is truncated".into()));
        }
        let (nonce, ciphertext) = body.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().expect("split at the nonce length");
        key.cipher()
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: ciphertext,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| VaultError::Tampered(id.to_owned()))
    }

    /// Whether `sealed` is sealed under the current key (nothing to do when re-sealing).
    pub fn is_current(&self, sealed: &str) -> bool {
        sealed_key_id(sealed).is_ok_and(|id| id == self.current_id())
    }
}

/// The id of the master key that sealed `sealed`.
pub fn sealed_key_id(sealed: &str) -> Result<&str, VaultError> {
    let rest = sealed
        .strip_prefix(SEALED_PREFIX)
        .ok_or_else(|| VaultError::Malformed(format!("it does not start with {SEALED_PREFIX}")))?;
    rest.split_once(':')
        .map(|(id, _)| id)
        .ok_or_else(|| VaultError::Malformed("no key id".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_depend_on_the_key_and_the_master_key_only() {
        let ring = Keyring::ephemeral();
        let digest = ring.digest("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        assert_eq!(
            digest,
            ring.digest("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        );
        assert_eq!(digest.key_id, ring.current_id());
        assert_eq!(digest.hex.len(), 64);
        assert_ne!(
            digest,
            ring.digest("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx")
        );
        let other = Keyring::ephemeral();
        assert_ne!(
            digest.hex,
            other.digest("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").hex
        );
    }

    #[test]
    fn sealed_values_open_with_their_context_only() {
        let ring = Keyring::ephemeral();
        let sealed = ring.seal("ep_1", b"whsec_secret");
        assert!(sealed.starts_with(&format!("hk1:{}:", ring.current_id())));
        assert!(!sealed.contains("whsec"));
        assert_eq!(ring.unseal("ep_1", &sealed).unwrap(), b"whsec_secret");
        assert_eq!(
            ring.unseal("ep_2", &sealed),
            Err(VaultError::Tampered(ring.current_id().into()))
        );
        assert_ne!(
            ring.seal("ep_1", b"x"),
            ring.seal("ep_1", b"x"),
            "random nonces"
        );
    }

    #[test]
    fn an_altered_ciphertext_does_not_open() {
        let ring = Keyring::ephemeral();
        let sealed = ring.seal("ep_1", b"whsec_secret");
        let mut bytes = sealed.into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(bytes).unwrap();
        assert!(matches!(
            ring.unseal("ep_1", &altered),
            Err(VaultError::Tampered(_))
        ));
        assert!(matches!(
            ring.unseal("ep_1", "whsec_plain"),
            Err(VaultError::Malformed(_))
        ));
    }

    #[test]
    fn rotation_keeps_old_values_readable_and_seals_under_the_new_key() {
        let old = Keyring::ephemeral();
        let sealed_before = old.seal("ep_1", b"a");
        let new = old.rotated();
        assert_ne!(new.current_id(), old.current_id());
        assert_eq!(new.unseal("ep_1", &sealed_before).unwrap(), b"a");
        assert!(!new.is_current(&sealed_before));
        let sealed_after = new.seal("ep_1", b"a");
        assert!(new.is_current(&sealed_after));
        assert_eq!(
            old.unseal("ep_1", &sealed_after),
            Err(VaultError::UnknownKey(new.current_id().into()))
        );
        assert_eq!(
            new.current_only().unseal("ep_1", &sealed_before),
            Err(VaultError::UnknownKey(old.current_id().into()))
        );
    }

    #[test]
    fn key_files_round_trip_and_bad_ones_say_why() {
        let ring = Keyring::ephemeral().rotated();
        let parsed = Keyring::parse(&ring.to_file_text()).unwrap();
        assert_eq!(parsed.ids(), ring.ids());
        assert!(matches!(
            Keyring::parse("# nothing\n"),
            Err(VaultError::BadMasterKey(_))
        ));
        let short = Keyring::parse("AAAA").unwrap_err().to_string();
        assert!(short.contains("32 bytes"), "{short}");
        assert!(format!("{:?}", ring.keys[0]).starts_with("MasterKey("));
    }
}
