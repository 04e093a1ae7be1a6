//! A small time-bounded cache for lookups on the hot path (tokens, applications, event types),
//! so a publish does not read the database for what it read a moment ago.
//!
//! Entries expire after a fixed time, which bounds how long another process's change (a
//! revoked token, a deleted application) can go unseen; changes made through this process
//! clear the cache at once.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most entries kept; past it, expired entries are swept before inserting.
const SWEEP_ABOVE: usize = 10_000;

/// Values by key (text unless told), each trusted for `ttl` after it was stored.
pub struct TtlCache<V, K = String> {
    ttl: Duration,
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<V: Clone, K: Hash + Eq> TtlCache<V, K> {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::default(),
        }
    }

    /// The value under `key`, unless it has expired.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let entries = self.entries.lock().expect("cache poisoned");
        entries
            .get(key)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(value, _)| value.clone())
    }

    pub fn put(&self, key: K, value: V) {
        let mut entries = self.entries.lock().expect("cache poisoned");
        if entries.len() > SWEEP_ABOVE {
            entries.retain(|_, (_, at)| at.elapsed() < self.ttl);
        }
        entries.insert(key, (value, Instant::now()));
    }

    /// Forgets everything (after a change that may make any entry wrong).
    pub fn clear(&self) {
        self.entries.lock().expect("cache poisoned").clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_kept_until_cleared() {
        let cache = TtlCache::new(Duration::from_secs(60));
        cache.put(String::from("a"), 1);
        assert_eq!(cache.get("a"), Some(1));
        assert_eq!(cache.get("b"), None);
        cache.clear();
        assert_eq!(cache.get("a"), None);
    }

    #[test]
    fn values_expire() {
        let cache = TtlCache::new(Duration::ZERO);
        cache.put(String::from("a"), 1);
        assert_eq!(cache.get("a"), None);
    }
}
