//! What the engine does with the deliveries it holds under lease: starts them from their lanes
//! as workers free up, and gives back the claims of those it will not attempt, due again at
//! once, so that no claimer waits out their leases.
//!
//! A delivery may wait in its lane until its lease is nearly over (a low `rateLimit`, a pause
//! its receiver asked for); it is then given back unattempted, or its message could be in
//! flight twice. Shutting down, the engine stops claiming, gives back the claims still waiting
//! in lanes, and gives the attempts in flight a grace period to finish and be recorded; the
//! claims of those still running at its end are given back.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use hookd_core::EndpointId;
use hookd_core::model::Delivery;
use hookd_store::ClaimedDelivery;

use crate::pipeline::dispatcher::{Engine, held_budget, unrecorded_budget};

impl Engine {
    /// Starts what `endpoint`'s lane may start now.
    pub(super) fn pump(self: &Arc<Self>, endpoint: &EndpointId) {
        if self.stopping.load(Ordering::Acquire) {
            return;
        }
        let workers = &self.workers;
        let (starts, starved) = self.lanes.next_starts(
            endpoint,
            || workers.clone().try_acquire_owned().ok(),
            |claimed| claimed.endpoint.throttle_rate,
        );
        if starved {
            self.starved
                .lock()
                .expect("starved poisoned")
                .push_back(endpoint.clone());
        }
        for start in starts {
            tokio::spawn(self.clone().attempt(start));
        }
    }

    /// Starts the lanes that waited for a worker, in the order they asked, while workers are
    /// free.
    pub(super) fn pump_starved(self: &Arc<Self>) {
        let mut seen = HashSet::new();
        while self.workers.available_permits() > 0 {
            let next = self.starved.lock().expect("starved poisoned").pop_front();
            let Some(endpoint) = next else { return };
            if seen.insert(endpoint.clone()) {
                self.pump(&endpoint);
            }
        }
    }

    /// Whether an attempt started now could still run when its claim's lease ends. A delivery
    /// waits in its endpoint's lane after its claim, and may wait that long (a low
    /// `rateLimit`, a receiver that asked for a pause). Once the lease is over, another claim
    /// may take the delivery, and its message would be in flight twice.
    pub(super) fn would_outlive_its_lease(&self, claimed: &ClaimedDelivery) -> bool {
        let lease_until = claimed.delivery.next_attempt_at;
        lease_until.is_some_and(|end| self.clock.now().plus(self.timeout(claimed)) > end)
    }

    /// Gives back the claim of a delivery not attempted: due at once, for the next claim.
    pub(super) async fn give_back(&self, delivery: Delivery) {
        let (message_id, endpoint_id) = (delivery.message_id.clone(), delivery.endpoint_id.clone());
        match self
            .store
            .release_claims(&[delivery], self.clock.now())
            .await
        {
            Ok(_) => {
                tracing::warn!(%message_id, %endpoint_id, "a delivery waited for its endpoint until its lease was nearly over; given back unattempted")
            }
            Err(error) => {
                tracing::warn!(%error, %message_id, %endpoint_id, "cannot give back a delivery that waited out its lease; it is due again when the lease ends")
            }
        }
        self.wake.notify_one();
    }

    /// Gives back the claims waiting in lanes, waits (up to the grace) until every attempt in
    /// flight is recorded, then stops the attempts still running and releases their claims.
    pub(super) async fn drain(&self) {
        let budget = held_budget(self.config.workers.max(1));
        let waiting = self.lanes.take_waiting();
        if !waiting.is_empty() {
            let deliveries: Vec<Delivery> =
                waiting.iter().map(|h| h.claimed.delivery.clone()).collect();
            self.release(&deliveries, "claimed ahead and not started")
                .await;
        }
        drop(waiting);
        let busy =
            unrecorded_budget(self.config.workers.max(1)) - self.unrecorded.available_permits();
        if busy > 0 {
            tracing::info!(attempts = busy, grace = ?self.config.shutdown_grace, "stopped claiming; waiting for the attempts in flight");
        }
        let all_done =
            tokio::time::timeout(self.config.shutdown_grace, self.all_recorded(budget)).await;
        if all_done.is_ok() {
            return;
        }
        self.cut_short.send_replace(true);
        // Stopped attempts give their tickets and places back at once; answered ones their
        // places once recorded.
        self.all_recorded(budget).await;
        let abandoned = std::mem::take(&mut *self.abandoned.lock().expect("abandoned poisoned"));
        self.release(
            &abandoned,
            "still running after the shutdown grace were stopped",
        )
        .await;
    }

    /// Completes once no delivery is held and no attempt is in flight or waiting for its
    /// record: every ticket back (no attempt in flight), then every place (all recorded).
    async fn all_recorded(&self, budget: usize) {
        let places = unrecorded_budget(self.config.workers.max(1));
        let _tickets = self.tickets.acquire_many(budget as u32).await;
        let _places = self.unrecorded.acquire_many(places as u32).await;
    }

    /// Gives back the claims of deliveries not attempted: due at once, for any claimer.
    pub(super) async fn release(&self, deliveries: &[Delivery], what: &str) {
        match self
            .store
            .release_claims(deliveries, self.clock.now())
            .await
        {
            Ok(released) => tracing::info!(
                deliveries = deliveries.len(),
                released,
                "deliveries {what}; their claims are given back, due again at once"
            ),
            Err(error) => {
                tracing::warn!(%error, deliveries = deliveries.len(), "cannot give back the claims of deliveries {what}; they are due again when their leases end")
            }
        }
    }
}
