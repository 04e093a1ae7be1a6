//! Pooled connections with a lifetime: one client per endpoint origin, replaced once it is
//! older than the connection lifetime.
//!
//! A pooled connection to a receiver lives as long as the receiver keeps it open, so a
//! receiver that moves to new addresses (a DNS change, a blue-green switch) would go on getting
//! deliveries at its old ones. Neither reqwest nor hyper closes a busy pooled connection after
//! a set time, so each origin (scheme, host, port) gets its own client, and a client older
//! than the lifetime is dropped for a fresh one: its idle connections close (those in flight
//! finish first), and the fresh client resolves the name again before connecting. Age is read
//! from hookd's [`Clock`], so tests move time rather than wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookd_core::{Clock, Timestamp};
use reqwest::Client;
use url::Url;

use super::BuildError;

/// The clients by origin, each with the time it was built.
pub(super) struct ClientsByOrigin {
    build: Box<dyn Fn() -> Result<Client, BuildError> + Send + Sync>,
    lifetime: Duration,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    clients: HashMap<String, Aged>,
    /// When clients past their lifetime were last dropped from the map: origins no longer
    /// sent to must not keep a client for ever.
    swept: Timestamp,
}

struct Aged {
    client: Client,
    built: Timestamp,
}

impl std::fmt::Debug for ClientsByOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientsByOrigin")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

impl ClientsByOrigin {
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
            state: Mutex::default(),
        }
    }

    /// The client for `url`'s origin: the pooled one while it is younger than the lifetime,
    /// otherwise a fresh one.
    pub(super) fn client_for(&self, url: &Url) -> Result<Client, BuildError> {
        let origin = url.origin().ascii_serialization();
        let now = self.clock.now();
        if let Some(client) = self.current(&origin, now) {
            return Ok(client);
        }
        // Built outside the lock: building loads root certificates, and sends to other
        // origins must not wait for it.
        let fresh = (self.build)()?;
        let mut state = self.state.lock().expect("client map lock");
        let entry = state.clients.entry(origin).or_insert_with(|| Aged {
            client: fresh.clone(),
            built: now,
        });
        if !self.alive(entry, now) {
            *entry = Aged {
                client: fresh,
                built: now,
            };
        }
        Ok(entry.client.clone())
    }

    /// The pooled client of `origin` if it is within its lifetime; sweeps the expired ones
    /// once a lifetime.
    fn current(&self, origin: &str, now: Timestamp) -> Option<Client> {
        let mut state = self.state.lock().expect("client map lock");
        if now >= state.swept.plus(self.lifetime) {
            state
                .clients
                .retain(|_, aged| now < aged.built.plus(self.lifetime));
            state.swept = now;
        }
        let aged = state.clients.get(origin)?;
        self.alive(aged, now).then(|| aged.client.clone())
    }

    fn alive(&self, aged: &Aged, now: Timestamp) -> bool {
        now < aged.built.plus(self.lifetime)
    }
}
