//! Per-endpoint fairness: a concurrency cap and a rate limit for each endpoint, and a pause
//! for one that answered it is overloaded, kept in memory.
//!
//! The global worker budget bounds hookd as a whole; these bound what one endpoint may take of
//! it, so a slow or dead endpoint holds at most its cap of workers while every other endpoint
//! keeps its normal latency. The dispatcher asks which endpoints are full (or paused) before
//! claiming, so their backlog stays in the database instead of in memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookd_core::EndpointId;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The limits of every endpoint with work claimed.
pub struct EndpointLimits {
    concurrency: usize,
    slots: Mutex<HashMap<EndpointId, Slot>>,
}

struct Slot {
    /// Deliveries claimed and not yet sent.
    claimed: usize,
    /// At most `concurrency` of them in flight.
    in_flight: Arc<Semaphore>,
    /// The earliest time the next attempt may start under the endpoint's rate limit.
    next_start: Instant,
    /// No new work is taken for the endpoint before this: it asked to slow down.
    held_until: Instant,
}

impl Slot {
    fn held(&self) -> bool {
        self.held_until > Instant::now()
    }
}

/// A claimed delivery's hold on its endpoint's limits; released when dropped.
pub struct Claim {
    limits: Arc<EndpointLimits>,
    endpoint: EndpointId,
    semaphore: Arc<Semaphore>,
}

impl EndpointLimits {
    /// Limits allowing `concurrency` attempts in flight per endpoint.
    pub fn new(concurrency: usize) -> Arc<Self> {
        Arc::new(Self {
            concurrency: concurrency.max(1),
            slots: Mutex::default(),
        })
    }

    /// Endpoints that already have as much claimed work as they may run at once, or that
    /// asked to slow down (see [`Self::hold`]).
    pub fn full(&self) -> Vec<EndpointId> {
        let slots = self.slots.lock().expect("limits poisoned");
        slots
            .iter()
            .filter(|(_, slot)| slot.claimed >= self.concurrency || slot.held())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Notes one more claimed delivery for `endpoint`.
    pub fn claim(self: &Arc<Self>, endpoint: &EndpointId) -> Claim {
        self.claim_if(endpoint, |_| true).expect("no cap on claims")
    }

    /// Notes one more claimed delivery for `endpoint` unless it is full (see [`Self::full`]):
    /// a delivery taken this way never waits behind its endpoint's other attempts.
    pub fn try_claim(self: &Arc<Self>, endpoint: &EndpointId) -> Option<Claim> {
        self.claim_if(endpoint, |slot| {
            slot.claimed < self.concurrency && !slot.held()
        })
    }

    fn claim_if(
        self: &Arc<Self>,
        endpoint: &EndpointId,
        room: impl FnOnce(&Slot) -> bool,
    ) -> Option<Claim> {
        let mut slots = self.slots.lock().expect("limits poisoned");
        let slot = slots.entry(endpoint.clone()).or_insert_with(|| Slot {
            claimed: 0,
            in_flight: Arc::new(Semaphore::new(self.concurrency)),
            next_start: Instant::now(),
            held_until: Instant::now(),
        });
        if !room(slot) {
            return None;
        }
        slot.claimed += 1;
        Some(Claim {
            limits: self.clone(),
            endpoint: endpoint.clone(),
            semaphore: slot.in_flight.clone(),
        })
    }

    /// The time an attempt may start at a rate of `per_second` (none: now), reserving it.
    fn reserve_start(&self, endpoint: &EndpointId, per_second: Option<u16>) -> Instant {
        let now = Instant::now();
        let Some(rate) = per_second.filter(|r| *r > 0) else {
            return now;
        };
        let mut slots = self.slots.lock().expect("limits poisoned");
        let Some(slot) = slots.get_mut(endpoint) else {
            return now;
        };
        let start = slot.next_start.max(now);
        slot.next_start = start + Duration::from_secs(1) / u32::from(rate);
        start
    }

    /// Takes no new work for `endpoint` for `pause`: it answered that it is overloaded. Its
    /// deliveries already claimed go on (each within its lease); the rest wait in the
    /// database, and this process's claims skip the endpoint until the pause is over.
    pub fn hold(&self, endpoint: &EndpointId, pause: Duration) {
        let mut slots = self.slots.lock().expect("limits poisoned");
        if let Some(slot) = slots.get_mut(endpoint) {
            slot.held_until = slot.held_until.max(Instant::now() + pause);
        }
    }

    fn release(&self, endpoint: &EndpointId) {
        let mut slots = self.slots.lock().expect("limits poisoned");
        if let Some(slot) = slots.get_mut(endpoint) {
            slot.claimed -= 1;
            if slot.claimed == 0 && slot.next_start <= Instant::now() && !slot.held() {
                slots.remove(endpoint);
            }
        }
    }
}

impl Claim {
    /// Waits for a free in-flight slot and for the rate limit, then returns the slot.
    pub async fn ready(&self, per_second: Option<u16>) -> OwnedSemaphorePermit {
        let permit = self
            .semaphore
            .clone()
            .acquire_owned()
            .await
            .expect("limits never close");
        tokio::time::sleep_until(self.limits.reserve_start(&self.endpoint, per_second)).await;
        permit
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.limits.release(&self.endpoint);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(n: u8) -> EndpointId {
        EndpointId::from_stored(format!("ep_{n}"))
    }

    #[tokio::test]
    async fn an_endpoint_is_full_at_its_concurrency_and_frees_on_release() {
        let limits = EndpointLimits::new(2);
        let first = limits.claim(&endpoint(1));
        let _second = limits.claim(&endpoint(1));
        let _other = limits.claim(&endpoint(2));
        assert_eq!(limits.full(), vec![endpoint(1)]);
        drop(first);
        assert!(limits.full().is_empty());
    }

    #[tokio::test]
    async fn a_full_endpoint_takes_no_more_tries_until_one_is_released() {
        let limits = EndpointLimits::new(2);
        let first = limits.try_claim(&endpoint(1)).expect("room for two");
        let _second = limits.try_claim(&endpoint(1)).expect("room for two");
        assert!(limits.try_claim(&endpoint(1)).is_none(), "full at two");
        assert!(
            limits.try_claim(&endpoint(2)).is_some(),
            "another endpoint has room"
        );
        drop(first);
        assert!(limits.try_claim(&endpoint(1)).is_some(), "room again");
    }

    #[tokio::test]
    async fn an_endpoint_held_back_takes_no_new_work_until_its_pause_is_over() {
        let limits = EndpointLimits::new(4);
        let claimed = limits.try_claim(&endpoint(1)).expect("room");
        limits.hold(&endpoint(1), Duration::from_secs(3_600));
        assert!(limits.try_claim(&endpoint(1)).is_none(), "held back");
        assert!(limits.try_claim(&endpoint(2)).is_some(), "others are not");
        assert_eq!(limits.full(), vec![endpoint(1)], "claims skip it");
        drop(claimed);
        assert!(
            limits.try_claim(&endpoint(1)).is_none(),
            "still held with nothing in flight"
        );

        let _other = limits.try_claim(&endpoint(3)).expect("room");
        limits.hold(&endpoint(3), Duration::ZERO);
        assert!(
            limits.try_claim(&endpoint(3)).is_some(),
            "a pause that is over"
        );
    }

    #[tokio::test]
    async fn no_more_than_the_cap_run_at_once() {
        let limits = EndpointLimits::new(1);
        let first = limits.claim(&endpoint(1));
        let second = limits.claim(&endpoint(1));
        let running = first.ready(None).await;
        let waiting = tokio::time::timeout(Duration::from_millis(20), second.ready(None)).await;
        assert!(
            waiting.is_err(),
            "the second attempt must wait for the first"
        );
        drop(running);
        let _running = tokio::time::timeout(Duration::from_secs(5), second.ready(None))
            .await
            .expect("runs after the first");
    }

    #[tokio::test(start_paused = true)]
    async fn the_rate_limit_spaces_attempts_out() {
        let limits = EndpointLimits::new(10);
        let claims: Vec<_> = (0..3).map(|_| limits.claim(&endpoint(1))).collect();
        let start = Instant::now();
        for claim in &claims {
            drop(claim.ready(Some(2)).await);
        }
        assert_eq!(
            Instant::now() - start,
            Duration::from_secs(1),
            "3 attempts at 2/s take 1 s"
        );
    }
}
