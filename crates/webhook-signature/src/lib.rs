//! Standard Webhooks signatures for senders and receivers: `v1` (HMAC-SHA256) and `v1a`
//! (ed25519) signing and verification, the secrets and keys they use, and signing and
//! verification of the Stripe, GitHub, Shopify and Slack schemes. No server, no database, no
//! async runtime.
//!
//! ```
//! use webhook_signature::{Secret, Signer, SigningKey, Verifier};
//!
//! let secret = Secret::generate();
//! let signer = Signer::new([SigningKey::Hmac(secret.clone())]);
//! let headers = signer.headers("msg_1", 1_700_000_000, b"{}").unwrap();
//!
//! let verifier = Verifier::new(secret).now(1_700_000_010);
//! assert!(verifier.verify(b"{}", headers.pairs()).is_ok());
//! ```
//!
//! # Layout
//! - `secret`: [`Secret`] (`whsec_`), [`Ed25519SecretKey`] (`whsk_`), [`Ed25519PublicKey`]
//!   (`whpk_`), and the [`SigningKey`] / [`VerifyingKey`] a sender or receiver holds:
//!   generating, parsing, printing.
//! - `sign`: signed content, [`ReadyKey`] (a key prepared to sign many messages) and
//!   [`Signer`], one header entry per active key.
//! - `verify`: [`Verifier`], headers then time window then any matching entry.
//! - [`header`]: the three header names, [`WebhookHeaders`], splitting the signature entries.
//! - [`clock`]: the system clock, strict timestamp parsing, [`TimeWindow`].
//! - [`stripe`], [`github`], [`shopify`], [`slack`]: the other schemes receivers meet.
//! - `mac`: HMAC-SHA256 and constant-time comparison, shared by all schemes.
//! - `error`: [`KeyError`], [`SignError`], [`VerifyError`].

#![warn(missing_docs)]

pub mod clock;
mod error;
pub mod github;
pub mod header;
mod mac;
mod secret;
pub mod shopify;
mod sign;
pub mod slack;
pub mod stripe;
mod verify;

pub use clock::TimeWindow;
pub use error::{KeyError, SignError, VerifyError};
pub use header::WebhookHeaders;
pub use secret::{
    ED25519_PUBLIC_PREFIX, ED25519_SECRET_PREFIX, Ed25519PublicKey, Ed25519SecretKey,
    GENERATED_SECRET_LEN, SECRET_PREFIX, Secret, SigningKey, VerifyingKey,
};
pub use sign::{ReadyKey, Signer};
pub use verify::Verifier;
