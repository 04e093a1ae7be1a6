//! The handoff: new deliveries taken as they are written, already claimed, without a claim
//! of their own.
//!
//! The store asks the engine ([`hookd_store::Handoff`]) for room as it writes a delivery: a
//! ticket of the deliveries the engine may hold and a place in the endpoint's lane. The
//! engine answers with a [`Reservation`], which the store fulfils once the write commits (the
//! delivery is then queued in its lane under a lease) or drops, giving the room back. So a new
//! message's first attempt waits for no claim.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use hookd_core::EndpointId;
use hookd_store::{ClaimedDelivery, Handoff, Reserved};
use tokio::sync::OwnedSemaphorePermit;

use crate::pipeline::dispatcher::Engine;
use crate::pipeline::lanes::Held;

impl Handoff for Engine {
    /// Takes a new delivery when its endpoint's lane has room and the engine may hold one
    /// more, so its attempt starts as soon as the endpoint has a free slot.
    fn reserve(&self, endpoint: &EndpointId) -> Option<Reserved> {
        if self.stopping.load(Ordering::Acquire) {
            return None;
        }
        let engine = self.me.upgrade()?;
        let Ok(ticket) = self.tickets.clone().try_acquire_owned() else {
            // Queued instead. A claim in flight holds tickets and may have read before this
            // delivery was written: claim again once it is done, rather than count on the
            // writer's wake-up.
            self.wake.notify_one();
            return None;
        };
        if !self.lanes.reserve(endpoint) {
            return None;
        }
        let lease_until = self.clock.now().plus(self.config.lease);
        let reservation = Reservation {
            engine,
            endpoint: endpoint.clone(),
            ticket: Some(ticket),
        };
        Some(Reserved::new(lease_until, move |claimed| {
            reservation.fulfil(claimed);
        }))
    }

    fn per_endpoint(&self) -> usize {
        self.config.endpoint_max_concurrency
    }
}

/// Room a lane holds for a delivery being written; given back if dropped unfulfilled.
struct Reservation {
    engine: Arc<Engine>,
    endpoint: EndpointId,
    ticket: Option<OwnedSemaphorePermit>,
}

impl Reservation {
    fn fulfil(mut self, claimed: ClaimedDelivery) {
        let ticket = self.ticket.take().expect("fulfilled once");
        let claimed = Box::new(claimed);
        let held = Held {
            claimed,
            _ticket: ticket,
        };
        self.engine.lanes.admit(held, true);
        self.engine.pump(&self.endpoint);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.ticket.is_some() {
            self.engine.lanes.unreserve(&self.endpoint);
        }
    }
}
