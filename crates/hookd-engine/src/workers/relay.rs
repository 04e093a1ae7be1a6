//! The outbox relay: turns outbox rows that applications committed in their own transactions
//! into messages and deliveries.
//!
//! Every pass is one store transaction (see [`hookd_store::OutboxStore::relay_outbox`]), so a
//! crash at any instant loses no row and relays none twice. The relay runs when woken (on
//! PostgreSQL a producer's commit notifies every hookd process) or at its poll interval, and
//! tells the engine when it created deliveries.

use std::sync::Arc;
use std::time::Duration;

use hookd_core::{Clock, StrictlyLater};
use hookd_store::{RelayRules, Store};
use tokio::sync::Notify;

/// How the relay behaves.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// The rules each row must meet (the API's for a published message).
    pub rules: RelayRules,
    /// Most rows in one pass (one transaction).
    pub batch: usize,
    /// How often to look when nothing wakes the relay.
    pub poll_interval: Duration,
}

/// The outbox relay. Start it with [`Relay::run`].
pub struct Relay {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: RelayConfig,
    wake: Arc<Notify>,
    new_work: Arc<Notify>,
    /// Each pass's time, so that a pass's messages sort after the one before's (their ids
    /// are the order of rows sharing an ordering key).
    passes: StrictlyLater,
}

impl Relay {
    /// A relay over `store`, woken through `wake`; it notifies `new_work` when it has created
    /// deliveries (the same handle the API notifies).
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        config: RelayConfig,
        wake: Arc<Notify>,
        new_work: Arc<Notify>,
    ) -> Self {
        Self {
            store,
            clock,
            config,
            wake,
            new_work,
            passes: StrictlyLater::default(),
        }
    }

    /// Relays until `shutdown` completes.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            if self.pass().await {
                continue;
            }
            tokio::select! {
                () = &mut shutdown => break,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(self.config.poll_interval) => {}
            }
        }
    }

    /// One pass. Returns whether it was full, i.e. more rows may be waiting.
    async fn pass(&self) -> bool {
        let batch = self.config.batch.max(1);
        let now = self.passes.now(self.clock.as_ref());
        match self
            .store
            .relay_outbox(batch, &self.config.rules, now)
            .await
        {
            Ok(relayed) => {
                if relayed.deliveries > 0 {
                    self.new_work.notify_one();
                }
                if relayed.failed > 0 {
                    tracing::warn!(
                        failed = relayed.failed,
                        "outbox rows could not be relayed; they keep their error in the outbox table"
                    );
                }
                relayed.rows() == batch
            }
            Err(error) => {
                tracing::warn!(%error, "cannot relay the outbox; retrying after the poll interval");
                false
            }
        }
    }
}
