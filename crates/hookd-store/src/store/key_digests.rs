//! [`KeyDigestStore`]: the digests of endpoints' signing keys, which find a key without the
//! store holding it.

use async_trait::async_trait;
use hookd_core::{EndpointId, Timestamp};

use crate::{SealedRow, StoreError};

/// The keyed digests of every endpoint's signing keys (made by `hookd-vault` under a master
/// key, named by its id): which endpoint holds a key, and whether a key was shown.
///
/// They are written after the keys they digest, not with them: a key supplied for two
/// endpoints at the same instant can pass the reuse check on both.
#[async_trait]
pub trait KeyDigestStore: Send + Sync {
    /// Whether an endpoint other than `endpoint` holds a key of digest `digest`.
    async fn key_held_elsewhere(
        &self,
        digest: &str,
        endpoint: &EndpointId,
    ) -> Result<bool, StoreError>;

    /// Makes `digests` (made under master key `key_id`) the endpoint's: rows for the new ones,
    /// the others removed. Digests it had keep when they were shown. New rows are unshown,
    /// or, with `carry_shown` (the same keys digested under a new master key), shown when any
    /// of the endpoint's rows was.
    async fn set_key_digests(
        &self,
        endpoint: &EndpointId,
        key_id: &str,
        digests: &[String],
        carry_shown: bool,
    ) -> Result<(), StoreError>;

    /// Marks the endpoint's key of digest `digest` shown at `at`: `true` if it had not been
    /// shown before (exactly one of concurrent callers gets `true`).
    async fn mark_key_shown(
        &self,
        endpoint: &EndpointId,
        key_id: &str,
        digest: &str,
        at: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Endpoints with no key digest made under master key `key_id` (those from before
    /// digests, or digested under an older master key), in id order after `after`.
    async fn endpoints_without_digests(
        &self,
        key_id: &str,
        after: Option<&EndpointId>,
        limit: usize,
    ) -> Result<Vec<SealedRow>, StoreError>;
}
