//! Pooled connections with a lifetime: clients that are replaced once they are older than the
//! connection lifetime.
//!
//! A pooled connection to a receiver lives as long as the receiver keeps it open, so a
//! receiver that moves to new addresses (a DNS change, a blue-green switch) would go on getting
//! deliveries at its old ones. Neither reqwest nor hyper closes a busy pooled connection after
//! a set time, so the client that pools it is dropped for a fresh one: its idle connections
//! close (those in flight finish first), and the fresh client resolves the name again before
//! connecting. Age is read from hookd's [`Clock`], so tests move time rather than wait.
//!
//! Endpoint origins are spread over a few clients ([`SLOTS`]), each replaced on its own
//! schedule: replacing one client for every origin at once would reconnect every endpoint in
//! the same instant, and one client per origin would keep a client (and replace it) per
//! endpoint host.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookd_core::{Clock, Timestamp};
use url::Url;

use super::BuildError;

/// How many clients the origins are spread over.
const SLOTS: usize = 16;

/// The clients, each with the time it was built.
pub(super) struct AgedClients<Client> {
    build: Box<dyn Fn() -> Result<Client, BuildError> + Send + Sync>,
    lifetime: Duration,
    clock: Arc<dyn Clock>,
    /// Which slot an origin's connections live in.
    spread: RandomState,
    slots: Vec<Mutex<Option<Aged<Client>>>>,
}

struct Aged<Client> {
    client: Client,
    built: Timestamp,
}

impl<Client> std::fmt::Debug for AgedClients<Client> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgedClients")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

impl<Client: Clone> AgedClients<Client> {
    /// Clients made by `build`, each used for `lifetime` by `clock`.
    pub(super) fn new(
        build: impl Fn() -> Result<Client, BuildError> + Send + Sync + 'static,
        lifetime: Duration,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            build: Box::new(build),
            lifetime,
            clock,
            spread: RandomState::new(),
            slots: (0..SLOTS).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// The slot `url`'s origin is pooled in.
    pub(super) fn slot_for(&self, url: &Url) -> usize {
        let origin = url.origin().ascii_serialization();
        self.spread.hash_one(&origin) as usize % SLOTS
    }

    /// The client of `slot` (see [`Self::slot_for`]): the slot's while that is younger than
    /// the lifetime, otherwise a fresh one that takes the slot's place.
    pub(super) fn client_in(&self, slot: usize) -> Result<Client, BuildError> {
        let slot = &self.slots[slot];
        let now = self.clock.now();
        if let Some(client) = self.current(slot, now) {
            return Ok(client);
        }
        // Built outside the lock: sends through the same slot must not wait for it.
        let fresh = (self.build)()?;
        let mut aged = slot.lock().expect("client slot lock");
        match aged.as_ref() {
            // Another send replaced it meanwhile.
            Some(current) if self.alive(current, now) => Ok(current.client.clone()),
            _ => {
                *aged = Some(Aged {
                    client: fresh.clone(),
                    built: now,
                });
                Ok(fresh)
            }
        }
    }

    /// The slot's client if it is within its lifetime.
    fn current(&self, slot: &Mutex<Option<Aged<Client>>>, now: Timestamp) -> Option<Client> {
        let aged = slot.lock().expect("client slot lock");
        aged.as_ref()
            .filter(|aged| self.alive(aged, now))
            .map(|aged| aged.client.clone())
    }

    fn alive(&self, aged: &Aged<Client>, now: Timestamp) -> bool {
        now < aged.built.plus(self.lifetime)
    }
}
