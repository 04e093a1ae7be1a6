//! [`VaultError`]: why a secret could not be sealed, opened or loaded.

/// Why a sealed value could not be opened, or master keys could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VaultError {
    /// The value was sealed under a master key this process was not given.
    #[error("sealed with master key {0}, which this hookd was not given (see --master-key-file)")]
    UnknownKey(String),
    /// The ciphertext does not open: altered, truncated, or moved to another record.
    #[error("the sealed value does not open under master key {0}: altered or not this record's")]
    Tampered(String),
    /// The stored text is not in the sealed format at all.
    #[error("not a sealed value: {0}")]
    Malformed(String),
    /// A master key (file or environment) could not be read.
    #[error("bad master key: {0}")]
    BadMasterKey(String),
    /// The opened key set does not make a usable signer.
    #[error("unusable endpoint keys: {0}")]
    UnusableKeys(String),
}
