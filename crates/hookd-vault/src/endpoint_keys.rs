//! An endpoint's signing keys in the clear, as the API changes them and the engine signs with
//! them: which schemes it signs with, rotation with an overlap window, and the signer for one
//! instant. Its credential headers (see [`crate::CredentialHeaders`]) are sealed with them, so
//! they share one ciphertext, one compare-and-swap and one re-sealing. They exist in the clear
//! only in memory; the store gets them sealed.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use hookd_core::model::SealedKeys;
use hookd_core::{EndpointId, Timestamp};
use serde::{Deserialize, Serialize};
use webhook_signature::{Ed25519PublicKey, Ed25519SecretKey, ReadyKey, Secret, Signer, SigningKey};

use crate::{KeyDigest, Keyring, VaultError};

/// A signing key's text as stored: `whsec_…` or `whsk_…`.
pub fn key_text(key: &SigningKey) -> String {
    match key {
        SigningKey::Hmac(secret) => secret.to_string(),
        SigningKey::Ed25519(pair) => pair.to_string(),
    }
}

/// A signature scheme of the `webhook-signature` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scheme {
    /// HMAC-SHA256 with a shared `whsec_` secret.
    #[serde(rename = "v1")]
    V1,
    /// ed25519: hookd keeps the `whsk_` key, the receiver gets the `whpk_` public key.
    #[serde(rename = "v1a")]
    V1a,
}

impl Scheme {
    fn of(key: &SigningKey) -> Self {
        match key {
            SigningKey::Hmac(_) => Self::V1,
            SigningKey::Ed25519(_) => Self::V1a,
        }
    }

    /// A new random key of this scheme.
    pub fn generate(self) -> SigningKey {
        match self {
            Self::V1 => SigningKey::Hmac(Secret::generate()),
            Self::V1a => SigningKey::Ed25519(Ed25519SecretKey::generate()),
        }
    }
}

/// One key: current while `expires_at` is `None`; a rotated-out key signs until `expires_at`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyEntry {
    /// `whsec_…` or `whsk_…`.
    pub key: String,
    /// Unix milliseconds after which the key no longer signs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    #[serde(skip)]
    ready: Ready,
}

/// A key entry's key parsed and made ready to sign, kept beside its text (which never changes)
/// so that attempts neither parse the key nor hash its HMAC pads again. Empty until the key
/// first signs; equal to any other, since the text is what the entry is.
#[derive(Clone, Default)]
struct Ready(OnceLock<ReadyKey>);

impl PartialEq for Ready {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Ready {}

impl KeyEntry {
    fn new(key: String, expires_at: Option<i64>) -> Self {
        Self {
            key,
            expires_at,
            ready: Ready::default(),
        }
    }

    fn signing_key(&self) -> Result<SigningKey, VaultError> {
        SigningKey::parse(&self.key).map_err(|e| VaultError::UnusableKeys(e.to_string()))
    }

    /// The key ready to sign: made on first use, then kept.
    fn ready_key(&self) -> Result<ReadyKey, VaultError> {
        if let Some(ready) = self.ready.0.get() {
            return Ok(ready.clone());
        }
        let ready = ReadyKey::from(self.signing_key()?);
        Ok(self.ready.0.get_or_init(|| ready).clone())
    }

    fn signs_at(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|at| at > now.as_millis())
    }
}

/// Every key of one endpoint, current and rotated-out, and its credential headers.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointKeys {
    entries: Vec<KeyEntry>,
    /// Custom headers whose values are credentials, sent with every delivery like the clear
    /// ones. Absent from key sets sealed before headers were.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    headers: BTreeMap<String, String>,
    /// A destination's credentials by config field (`secretAccessKey`, the password of a
    /// broker URI): sealed beside the keys so a database dump never shows one. Absent from
    /// key sets sealed before destinations were.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    destination: BTreeMap<String, String>,
}

/// Never prints a key or a header value.
impl std::fmt::Debug for EndpointKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EndpointKeys({} keys)", self.entries.len())
    }
}

/// What the AEAD binds an endpoint's sealed keys to: they open only on their own row.
fn context(endpoint: &EndpointId) -> String {
    format!("hookd endpoint keys {endpoint}")
}

impl EndpointKeys {
    /// One current key per scheme in `schemes` (at least one), `hmac` as the v1 secret if
    /// given, others generated.
    pub fn new(schemes: &[Scheme], hmac: Option<Secret>) -> Result<Self, VaultError> {
        if schemes.is_empty() {
            return Err(VaultError::UnusableKeys(
                "an endpoint signs with at least one scheme".into(),
            ));
        }
        let mut keys = Self::default();
        for &scheme in schemes {
            let key = match (scheme, &hmac) {
                (Scheme::V1, Some(secret)) => SigningKey::Hmac(secret.clone()),
                _ => scheme.generate(),
            };
            keys.push(&key, None);
        }
        Ok(keys)
    }

    /// The keys of a row written before sealing existed: its plaintext `whsec_` secret.
    pub fn from_legacy_secret(secret: &str) -> Result<Self, VaultError> {
        let key = Secret::parse(secret).map_err(|e| VaultError::UnusableKeys(e.to_string()))?;
        Ok(Self {
            entries: vec![KeyEntry::new(key.to_string(), None)],
            ..Self::default()
        })
    }

    /// The endpoint's credential headers, by name.
    pub fn headers(&self) -> &BTreeMap<String, String> {
        &self.headers
    }

    /// Replaces the endpoint's credential headers.
    pub fn set_headers(&mut self, headers: BTreeMap<String, String>) {
        self.headers = headers;
    }

    /// The destination's credentials, by config field.
    pub fn destination_secrets(&self) -> &BTreeMap<String, String> {
        &self.destination
    }

    /// Replaces the destination's credentials.
    pub fn set_destination_secrets(&mut self, secrets: BTreeMap<String, String>) {
        self.destination = secrets;
    }

    fn push(&mut self, key: &SigningKey, expires_at: Option<i64>) {
        self.entries.push(KeyEntry::new(key_text(key), expires_at));
    }

    /// The digest of every key, current and rotated-out, under `keyring`'s current key.
    pub fn digests(&self, keyring: &Keyring) -> Vec<KeyDigest> {
        self.entries
            .iter()
            .map(|entry| keyring.digest(&entry.key))
            .collect()
    }

    fn current(&self) -> impl Iterator<Item = SigningKey> + '_ {
        self.entries
            .iter()
            .filter(|e| e.expires_at.is_none())
            .filter_map(|e| e.signing_key().ok())
    }

    /// The schemes the endpoint signs with from now on, v1 first.
    pub fn schemes(&self) -> Vec<Scheme> {
        let mut schemes: Vec<Scheme> = self.current().map(|k| Scheme::of(&k)).collect();
        schemes.sort_by_key(|s| *s as u8);
        schemes.dedup();
        schemes
    }

    /// The current `whsec_` secret, if the endpoint signs `v1`.
    pub fn secret(&self) -> Option<Secret> {
        self.current().find_map(|k| match k {
            SigningKey::Hmac(secret) => Some(secret),
            SigningKey::Ed25519(_) => None,
        })
    }

    /// The current `whpk_` public key, if the endpoint signs `v1a`.
    pub fn public_key(&self) -> Option<Ed25519PublicKey> {
        self.current().find_map(|k| match k {
            SigningKey::Ed25519(pair) => Some(pair.public_key()),
            SigningKey::Hmac(_) => None,
        })
    }

    /// Makes `new` the current key of its scheme. The key it replaces keeps signing beside it
    /// for `overlap` after `now` (at once retired when `overlap` is zero); keys whose overlap
    /// ended are dropped.
    pub fn rotate(&mut self, new: &SigningKey, now: Timestamp, overlap: Duration) {
        let scheme = Scheme::of(new);
        let until = now.plus(overlap).as_millis();
        self.entries.retain(|e| e.signs_at(now));
        for entry in &mut self.entries {
            let same_scheme = entry.signing_key().is_ok_and(|k| Scheme::of(&k) == scheme);
            if same_scheme && entry.expires_at.is_none() {
                entry.expires_at = Some(until);
            }
        }
        self.entries.retain(|e| e.signs_at(now));
        self.push(new, None);
    }

    /// Signs with exactly `schemes` from now on: a new key for each scheme not yet current,
    /// the keys of schemes no longer wanted removed at once.
    pub fn set_schemes(&mut self, schemes: &[Scheme]) -> Result<(), VaultError> {
        if schemes.is_empty() {
            return Err(VaultError::UnusableKeys(
                "an endpoint signs with at least one scheme".into(),
            ));
        }
        self.entries.retain(|e| {
            e.signing_key()
                .is_ok_and(|k| schemes.contains(&Scheme::of(&k)))
        });
        let have = self.schemes();
        for &scheme in schemes.iter().filter(|s| !have.contains(s)) {
            self.push(&scheme.generate(), None);
        }
        Ok(())
    }

    /// The signer for an attempt at `now`: every current key, then every rotated-out key whose
    /// overlap has not ended.
    pub fn signer_at(&self, now: Timestamp) -> Result<Signer, VaultError> {
        let mut live: Vec<&KeyEntry> = self.entries.iter().filter(|e| e.signs_at(now)).collect();
        live.sort_by_key(|e| e.expires_at.is_some());
        let keys = live
            .into_iter()
            .map(KeyEntry::ready_key)
            .collect::<Result<Vec<_>, _>>()?;
        if keys.is_empty() {
            return Err(VaultError::UnusableKeys("no key signs at this time".into()));
        }
        Ok(Signer::from_ready(keys))
    }

    /// Sealed under `keyring`'s current key, for `endpoint`'s row only.
    pub fn seal(&self, keyring: &Keyring, endpoint: &EndpointId) -> SealedKeys {
        let json = serde_json::to_vec(self).expect("key sets serialize");
        SealedKeys::from_stored(keyring.seal(&context(endpoint), &json))
    }

    /// Opens `endpoint`'s sealed keys.
    pub fn open(
        keyring: &Keyring,
        endpoint: &EndpointId,
        sealed: &SealedKeys,
    ) -> Result<Self, VaultError> {
        let json = keyring.unseal(&context(endpoint), sealed.as_str())?;
        serde_json::from_slice(&json)
            .map_err(|e| VaultError::Malformed(format!("the opened keys are not a key set: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use webhook_signature::{Verifier, VerifyingKey};

    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    fn verifies(signer: &Signer, key: VerifyingKey, now: Timestamp) -> bool {
        let secs = now.as_secs() as u64;
        let headers = signer.headers("msg_1", secs, b"{}").unwrap();
        Verifier::with_keys([key])
            .now(secs)
            .verify(b"{}", headers.pairs())
            .is_ok()
    }

    #[test]
    fn a_rotated_secret_signs_beside_the_new_one_until_the_overlap_ends() {
        let t0 = Timestamp::from_millis(1_700_000_000_000);
        let old = Secret::generate();
        let new = Secret::generate();
        let mut keys = EndpointKeys::new(&[Scheme::V1], Some(old.clone())).unwrap();
        keys.rotate(&SigningKey::Hmac(new.clone()), t0, 24 * HOUR);
        assert_eq!(
            keys.secret(),
            Some(new.clone()),
            "the new secret is current"
        );
        let during = keys.signer_at(t0.plus(23 * HOUR)).unwrap();
        assert!(verifies(&during, old.clone().into(), t0.plus(23 * HOUR)));
        assert!(verifies(&during, new.clone().into(), t0.plus(23 * HOUR)));
        let after = keys.signer_at(t0.plus(24 * HOUR)).unwrap();
        assert!(!verifies(&after, old.into(), t0.plus(24 * HOUR)));
        assert!(verifies(&after, new.into(), t0.plus(24 * HOUR)));
    }

    #[test]
    fn destination_secrets_are_sealed_with_the_keys_and_open_again() {
        let keyring = Keyring::new(vec![crate::MasterKey::generate()]).unwrap();
        let id = EndpointId::new(Timestamp::from_millis(1_700_000_000_000));
        let mut keys = EndpointKeys::new(&[Scheme::V1], None).unwrap();
        let secrets = BTreeMap::from([("secretAccessKey".to_owned(), "SK".to_owned())]);
        keys.set_destination_secrets(secrets.clone());
        let sealed = keys.seal(&keyring, &id);
        assert!(
            !sealed.as_str().contains("SK\""),
            "sealed text never shows a secret"
        );
        let opened = EndpointKeys::open(&keyring, &id, &sealed).unwrap();
        assert_eq!(opened.destination_secrets(), &secrets);
    }

    #[test]
    fn a_zero_overlap_retires_the_old_key_at_once_and_old_overlaps_are_dropped() {
        let t0 = Timestamp::from_millis(1_700_000_000_000);
        let mut keys = EndpointKeys::new(&[Scheme::V1], None).unwrap();
        keys.rotate(&Scheme::V1.generate(), t0, Duration::ZERO);
        assert_eq!(keys.entries.len(), 1);
        keys.rotate(&Scheme::V1.generate(), t0, HOUR);
        keys.rotate(&Scheme::V1.generate(), t0.plus(2 * HOUR), HOUR);
        assert_eq!(keys.entries.len(), 2, "the first overlap had ended");
    }

    #[test]
    fn ed25519_endpoints_expose_only_the_public_key_and_rotate_per_scheme() {
        let t0 = Timestamp::from_millis(1_700_000_000_000);
        let mut keys = EndpointKeys::new(&[Scheme::V1, Scheme::V1a], None).unwrap();
        assert_eq!(keys.schemes(), vec![Scheme::V1, Scheme::V1a]);
        let public = keys.public_key().unwrap();
        let secret = keys.secret().unwrap();
        let signer = keys.signer_at(t0).unwrap();
        let header = signer
            .signature("msg_1", t0.as_secs() as u64, b"{}")
            .unwrap();
        assert!(
            header.contains("v1,") && header.contains("v1a,"),
            "{header}"
        );
        assert!(verifies(&signer, public.into(), t0));
        keys.rotate(&Scheme::V1a.generate(), t0, HOUR);
        assert_ne!(keys.public_key(), Some(public));
        assert_eq!(keys.secret(), Some(secret), "rotating v1a leaves v1 alone");
        assert!(verifies(&keys.signer_at(t0).unwrap(), public.into(), t0));
        keys.set_schemes(&[Scheme::V1a]).unwrap();
        assert_eq!(keys.schemes(), vec![Scheme::V1a]);
        assert_eq!(keys.secret(), None);
        assert!(keys.set_schemes(&[]).is_err());
    }

    #[test]
    fn credential_headers_are_sealed_with_the_keys_and_old_key_sets_open_without_them() {
        let ring = Keyring::ephemeral();
        let ep = EndpointId::from_stored("ep_1".into());
        let mut keys = EndpointKeys::new(&[Scheme::V1], None).unwrap();
        let before_headers = keys.seal(&ring, &ep);
        keys.set_headers(BTreeMap::from([(
            "Authorization".into(),
            "Bearer t0ken".into(),
        )]));
        let sealed = keys.seal(&ring, &ep);
        assert!(!sealed.as_str().contains("t0ken"));
        let opened = EndpointKeys::open(&ring, &ep, &sealed).unwrap();
        assert_eq!(opened.headers()["Authorization"], "Bearer t0ken");
        let old = EndpointKeys::open(&ring, &ep, &before_headers).unwrap();
        assert!(old.headers().is_empty());
        assert_eq!(old.secret(), keys.secret());
    }

    #[test]
    fn sealed_keys_open_only_on_their_endpoint() {
        let ring = Keyring::ephemeral();
        let keys = EndpointKeys::new(&[Scheme::V1], None).unwrap();
        let ep = EndpointId::from_stored("ep_1".into());
        let sealed = keys.seal(&ring, &ep);
        assert!(!sealed.as_str().contains("whsec_"));
        assert_eq!(EndpointKeys::open(&ring, &ep, &sealed).unwrap(), keys);
        let other = EndpointId::from_stored("ep_2".into());
        assert!(matches!(
            EndpointKeys::open(&ring, &other, &sealed),
            Err(VaultError::Tampered(_))
        ));
        assert_eq!(format!("{keys:?}"), "EndpointKeys(1 keys)");
    }
}
