//! Endpoint keys kept open between attempts.
//!
//! Opening an endpoint's sealed keys is an AEAD decryption and a JSON parse, too much to repeat
//! for every attempt under load (docs/benchmarks.md#figures-behind-design-choices).
//! [`OpenedKeys`] opens each endpoint's keys once and keeps them while the sealed text stays
//! the same: a rotated secret or a re-sealed row has new text, so it is opened afresh.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hookd_core::EndpointId;
use hookd_core::model::SealedKeys;

use crate::{EndpointKeys, Keyring, VaultError};

/// Endpoints whose keys are kept open; past it, the cache starts again empty.
const KEPT: usize = 4096;

/// Opens endpoints' sealed keys under one keyring, remembering what it opened.
pub struct OpenedKeys {
    keyring: Arc<Keyring>,
    opened: Mutex<HashMap<EndpointId, (SealedKeys, Arc<EndpointKeys>)>>,
}

/// Never prints a key.
impl std::fmt::Debug for OpenedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OpenedKeys")
    }
}

impl OpenedKeys {
    pub fn new(keyring: Arc<Keyring>) -> Self {
        Self {
            keyring,
            opened: Mutex::default(),
        }
    }

    /// `endpoint`'s keys, sealed as `sealed`: as opened before if the text is the same.
    pub fn open(
        &self,
        endpoint: &EndpointId,
        sealed: &SealedKeys,
    ) -> Result<Arc<EndpointKeys>, VaultError> {
        if let Some((kept, keys)) = self.lock().get(endpoint)
            && kept == sealed
        {
            return Ok(keys.clone());
        }
        let keys = Arc::new(EndpointKeys::open(&self.keyring, endpoint, sealed)?);
        let mut opened = self.lock();
        if opened.len() >= KEPT {
            opened.clear();
        }
        opened.insert(endpoint.clone(), (sealed.clone(), keys.clone()));
        Ok(keys)
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<EndpointId, (SealedKeys, Arc<EndpointKeys>)>> {
        self.opened.lock().expect("opened keys poisoned")
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
