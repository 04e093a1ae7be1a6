//! Secrets at rest: endpoint signing keys (HMAC secrets and ed25519 private keys) and
//! credential headers are stored only sealed under a master key, so a database dump alone
//! never reveals one. The API seals its `Idempotency-Key` replays with the same keyring.
//!
//! The store keeps [`hookd_core::model::SealedKeys`] (opaque ciphertext) and never sees a key;
//! the API seals what it writes and the engine opens what it signs with. Master keys come from
//! configuration (a key file or the environment), never from the database.
//!
//! # Layout
//! - `keyring`: [`MasterKey`] and [`Keyring`]: XChaCha20-Poly1305 sealing with a random
//!   nonce and the sealing key's id on every ciphertext (so master keys can be rotated), the
//!   key-file format; [`KeyDigest`], the keyed digest that finds a signing key in the store
//!   without the store holding it.
//! - `endpoint_keys`: [`EndpointKeys`], an endpoint's keys in the clear (in memory only): the
//!   schemes it signs with (`v1` HMAC, `v1a` ed25519), rotation with an overlap window, the
//!   [`webhook_signature::Signer`] for a given instant, the credential headers sealed with
//!   them, and sealing them for one endpoint.
//! - `credentials`: [`CredentialHeaders`], which custom header names carry credentials.
//! - `opened`: [`KeptOpen`], what sealed text opens to, kept while the text stays the same, and
//!   [`OpenedKeys`], it for endpoints' keys, so the engine does not decrypt them for every
//!   attempt (the API keeps ingest sources' schemes open the same way).
//! - `error`: [`VaultError`].

mod credentials;
mod endpoint_keys;
mod error;
mod keyring;
mod opened;

pub use credentials::{CREDENTIAL_WORDS, CredentialHeaders};
pub use endpoint_keys::{EndpointKeys, KeyEntry, Scheme, key_text};
pub use error::VaultError;
pub use keyring::{KeyDigest, Keyring, MasterKey, SEALED_PREFIX};
pub use opened::{KeptOpen, OpenedKeys};
