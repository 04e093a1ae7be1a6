//! Sealed things kept open between uses.
//!
//! Opening sealed text is an AEAD decryption and a parse, too much to repeat for every attempt
//! or every received request under load (docs/benchmarks.md#figures-behind-design-choices).
//! [`KeptOpen`] opens each owner's sealed text once and keeps what it opened while the text
//! stays the same: a rotated secret or a re-sealed row has new text (a fresh nonce), so it is
//! opened afresh. [`OpenedKeys`] is it for endpoints' keys.

use std::hash::Hash;
use std::sync::{Arc, Mutex};

use hookd_core::EndpointId;
use hookd_core::model::SealedKeys;

use crate::{EndpointKeys, Keyring, VaultError};

/// Owners whose opened values are kept; past it, the cache starts again empty.
const KEPT: usize = 4096;

/// Values opened from sealed text, by owner, kept while the owner's sealed text is unchanged.
/// Hashed with foldhash: owners are hookd's own random ids, looked up for every attempt.
pub struct KeptOpen<K, V> {
    opened: Mutex<foldhash::HashMap<K, (String, Arc<V>)>>,
}

impl<K, V> Default for KeptOpen<K, V> {
    fn default() -> Self {
        Self {
            opened: Mutex::default(),
        }
    }
}

/// Never prints what it keeps.
impl<K, V> std::fmt::Debug for KeptOpen<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeptOpen")
    }
}

impl<K: Hash + Eq + Clone, V> KeptOpen<K, V> {
    /// What `owner`'s `sealed` text opens to: as opened before if the text is the same, else
    /// `open`ed now and kept.
    pub fn get_or_open<E>(
        &self,
        owner: &K,
        sealed: &str,
        open: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        if let Some((kept, value)) = self.lock().get(owner)
            && kept == sealed
        {
            return Ok(value.clone());
        }
        let value = Arc::new(open()?);
        let mut opened = self.lock();
        if opened.len() >= KEPT {
            opened.clear();
        }
        opened.insert(owner.clone(), (sealed.to_owned(), value.clone()));
        Ok(value)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, foldhash::HashMap<K, (String, Arc<V>)>> {
        self.opened.lock().expect("kept-open cache poisoned")
    }
}

/// Opens endpoints' sealed keys under one keyring, remembering what it opened.
#[derive(Debug)]
pub struct OpenedKeys {
    keyring: Arc<Keyring>,
    opened: KeptOpen<EndpointId, EndpointKeys>,
}

impl OpenedKeys {
    pub fn new(keyring: Arc<Keyring>) -> Self {
        Self {
            keyring,
            opened: KeptOpen::default(),
        }
    }

    /// `endpoint`'s keys, sealed as `sealed`: as opened before if the text is the same.
    pub fn open(
        &self,
        endpoint: &EndpointId,
        sealed: &SealedKeys,
    ) -> Result<Arc<EndpointKeys>, VaultError> {
        self.opened.get_or_open(endpoint, sealed.as_str(), || {
            EndpointKeys::open(&self.keyring, endpoint, sealed)
        })
    }
}

#[cfg(test)]
mod tests {
    use hookd_core::Timestamp;
    use webhook_signature::{Secret, SigningKey};

    use super::*;
    use crate::Scheme;

    #[test]
    fn a_resealed_key_set_is_opened_again_not_served_from_before() {
        let keyring = Arc::new(Keyring::ephemeral());
        let opened = OpenedKeys::new(keyring.clone());
        let endpoint = EndpointId::new(Timestamp::from_millis(0));
        let mut keys = EndpointKeys::new(&[Scheme::V1], Some(Secret::generate())).unwrap();
        let before = keys.seal(&keyring, &endpoint);
        assert_eq!(*opened.open(&endpoint, &before).unwrap(), keys);
        let at = Timestamp::from_millis(1_000);
        keys.rotate(
            &SigningKey::Hmac(Secret::generate()),
            at,
            std::time::Duration::ZERO,
        );
        let after = keys.seal(&keyring, &endpoint);
        assert_eq!(*opened.open(&endpoint, &after).unwrap(), keys);
        assert_ne!(*opened.open(&endpoint, &before).unwrap(), keys);
    }

    #[test]
    fn keys_sealed_for_another_endpoint_do_not_open() {
        let keyring = Arc::new(Keyring::ephemeral());
        let opened = OpenedKeys::new(keyring.clone());
        let (one, other) = (
            EndpointId::new(Timestamp::from_millis(0)),
            EndpointId::new(Timestamp::from_millis(1)),
        );
        let sealed = EndpointKeys::new(&[Scheme::V1], None)
            .unwrap()
            .seal(&keyring, &one);
        opened.open(&one, &sealed).unwrap();
        assert!(opened.open(&other, &sealed).is_err());
    }
}
