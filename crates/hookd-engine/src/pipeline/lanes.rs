//! Per-endpoint lanes: each endpoint's claimed deliveries wait in its lane for one of its
//! slots, so the limits of one endpoint never hold up another.
//!
//! A lane keeps a short window of its endpoint's due deliveries claimed ahead (under their
//! leases, oldest first), so a slot freed by an answer starts the next send without a round
//! trip to the database. How many slots it has is learned from the answers (see
//! [`crate::pipeline::adaptive`]), within the endpoint's ceiling; its `rateLimit` spaces the starts out,
//! and an endpoint that asked to slow down starts nothing until its pause is over. A slot is
//! the receiver's: it is freed the moment the answer is in, not when the attempt is recorded.
//!
//! The lanes only decide; the dispatcher starts what they hand it (see
//! [`Lanes::next_starts`]), outside their lock.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use hookd_core::EndpointId;
use hookd_store::ClaimedDelivery;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::pipeline::adaptive::{AdaptiveLimit, INITIAL_LIMIT, Signal, Started};

/// A lane with nothing claimed is forgotten (with the limit it learned) after this long idle.
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// A claimed delivery and its place in the budget of deliveries held (released once its
/// attempt is recorded or its claim given back). Boxed: a held delivery is moved from its
/// claim to its lane, its start and its attempt's task, and carries its message and endpoint.
pub struct Held {
    pub claimed: Box<ClaimedDelivery>,
    pub ticket: OwnedSemaphorePermit,
}

/// An attempt the lanes decided to start, with the global worker it holds.
pub struct Start {
    pub held: Held,
    pub worker: OwnedSemaphorePermit,
    /// Its endpoint's slot, reported back through [`Lanes::answered`].
    pub started: Started,
    /// Not before this instant (the endpoint's rate limit).
    pub at: Instant,
}

struct Lane {
    limit: AdaptiveLimit,
    /// Claimed, waiting for a slot, oldest first.
    waiting: VecDeque<Held>,
    /// Being written claimed by a publish, not yet committed (see `hookd_store::Handoff`).
    reserved: usize,
    in_flight: usize,
    /// The earliest start allowed by the endpoint's rate limit.
    next_start: Instant,
    /// It asked to slow down: nothing starts, nothing new is taken before this.
    held_until: Instant,
    /// A claim took as many as it was offered, or a publish found the lane full: more may
    /// wait in the database.
    backlog: bool,
    idle_since: Option<Instant>,
}

impl Lane {
    fn new(ceiling: usize) -> Self {
        let now = Instant::now();
        Self {
            limit: AdaptiveLimit::new(ceiling),
            waiting: VecDeque::new(),
            reserved: 0,
            in_flight: 0,
            next_start: now,
            held_until: now,
            backlog: false,
            idle_since: None,
        }
    }

    fn paused(&self) -> bool {
        self.held_until > Instant::now()
    }

    /// Deliveries held for the endpoint here: waiting, being written, or in flight.
    fn held(&self) -> usize {
        self.waiting.len() + self.reserved + self.in_flight
    }

    /// How many more deliveries it takes now: its slots, plus as many again claimed ahead.
    fn room(&self) -> usize {
        if self.paused() {
            return 0;
        }
        (2 * self.limit.current()).saturating_sub(self.held())
    }

    /// Whether it would take a claim's worth more: at most half its window is left waiting
    /// (so the refill arrives before the slots run dry) and the database may hold more of its
    /// deliveries.
    fn wants_refill(&self) -> bool {
        self.backlog
            && !self.paused()
            && 2 * (self.waiting.len() + self.reserved) <= self.limit.current()
    }

    fn note_idle(&mut self) {
        self.idle_since = (self.held() == 0).then(Instant::now);
    }
}

/// Every endpoint's lane.
pub struct Lanes {
    /// The server's ceiling on any endpoint's attempts in flight.
    ceiling: usize,
    lanes: Mutex<HashMap<EndpointId, Lane>>,
}

impl Lanes {
    pub fn new(ceiling: usize) -> Self {
        Self {
            ceiling: ceiling.max(1),
            lanes: Mutex::default(),
        }
    }

    /// The endpoint's ceiling: the server's, or its own if lower.
    fn ceiling_of(&self, own: Option<u16>) -> usize {
        own.map_or(self.ceiling, |own| {
            self.ceiling.min(usize::from(own).max(1))
        })
    }

    /// How many deliveries a claim may take of an endpoint it has no lane for.
    pub fn fresh_room(&self) -> usize {
        2 * INITIAL_LIMIT.min(self.ceiling)
    }

    /// The room of every lane whose room is not [`Self::fresh_room`] (0 for a full or paused
    /// one), for a claim; forgets lanes idle for long.
    pub fn rooms(&self) -> HashMap<EndpointId, usize> {
        let mut lanes = self.lanes.lock().expect("lanes poisoned");
        let now = Instant::now();
        lanes.retain(|_, lane| {
            lane.idle_since
                .is_none_or(|since| now.duration_since(since) < FORGET_AFTER)
                || lane.paused()
        });
        let fresh = self.fresh_room();
        lanes
            .iter()
            .map(|(id, lane)| (id, lane.room()))
            .filter(|(_, room)| *room != fresh)
            .map(|(id, room)| (id.clone(), room))
            .collect()
    }

    /// After a claim that offered `offered` (its rooms, and [`Self::fresh_room`] to every
    /// other endpoint) and took `took` of each endpoint: which lanes may have more waiting.
    pub fn claimed(&self, offered: &HashMap<EndpointId, usize>, took: &HashMap<EndpointId, usize>) {
        let fresh = self.fresh_room();
        let mut lanes = self.lanes.lock().expect("lanes poisoned");
        for (id, lane) in lanes.iter_mut() {
            let room = offered.get(id).copied().unwrap_or(fresh);
            let took = took.get(id).copied().unwrap_or(0);
            lane.backlog = room == 0 || took >= room;
        }
    }

    /// Whether any lane would take a refill from the database.
    pub fn any_wants_refill(&self) -> bool {
        let lanes = self.lanes.lock().expect("lanes poisoned");
        lanes.values().any(Lane::wants_refill)
    }

    /// Reserves room for a delivery being written to `endpoint` (a publish), unless its lane
    /// is full or paused; a full lane notes that work waits for it.
    pub fn reserve(&self, endpoint: &EndpointId) -> bool {
        let mut lanes = self.lanes.lock().expect("lanes poisoned");
        let lane = lanes
            .entry(endpoint.clone())
            .or_insert_with(|| Lane::new(self.ceiling));
        if lane.room() == 0 {
            lane.backlog = true;
            return false;
        }
        lane.reserved += 1;
        lane.idle_since = None;
        true
    }

    /// A reservation not used (its write failed or was refused).
    pub fn unreserve(&self, endpoint: &EndpointId) {
        let mut lanes = self.lanes.lock().expect("lanes poisoned");
        if let Some(lane) = lanes.get_mut(endpoint) {
            lane.reserved -= 1;
            lane.note_idle();
        }
    }

    /// Queues a claimed delivery in its endpoint's lane; `reserved`: it was reserved with
    /// [`Self::reserve`].
    pub fn admit(&self, held: Held, reserved: bool) {
        let endpoint = &held.claimed.endpoint;
        let ceiling = self.ceiling_of(endpoint.max_concurrency);
        let mut lanes = self.lanes.lock().expect("lanes poisoned");
        let lane = lanes
            .entry(endpoint.id.clone())
            .or_insert_with(|| Lane::new(ceiling));
        lane.limit.set_ceiling(ceiling);
        if reserved {
            lane.reserved -= 1;
        }
        lane.idle_since = None;
        lane.waiting.push_back(held);
    }

    /// The attempts `endpoint`'s lane may start now, each with a global worker from `worker`
    /// and its start time under the rate limit `per_second`. Returns them and whether the lane
    /// still had work it could start but for want of workers.
    pub fn next_starts(
        &self,
        endpoint: &EndpointId,
        worker: impl Fn() -> Option<OwnedSemaphorePermit>,
        per_second: impl Fn(&ClaimedDelivery) -> Option<u16>,
    ) -> (Vec<Start>, bool) {
        let mut lanes = self.lanes.lock().expect("lanes poisoned");
        let Some(lane) = lanes.get_mut(endpoint) else {
            return (Vec::new(), false);
        };
        if lane.paused() {
            return (Vec::new(), false);
        }
        let (mut batch, mut short_of_workers) = (Vec::new(), false);
        while lane.in_flight < lane.limit.current() && !lane.waiting.is_empty() {
            let Some(worker) = worker() else {
                short_of_workers = true;
                break;
            };
            let held = lane.waiting.pop_front().expect("not empty");
            let at = next_start(lane, per_second(&held.claimed));
            lane.in_flight += 1;
            batch.push((held, worker, at));
        }
        // Started together, they reach the receiver together: each finds all of them there.
        let started = lane.limit.start(lane.in_flight);
        let starts = batch
            .into_iter()
            .map(|(held, worker, at)| Start {
                held,
                worker,
                started,
                at,
            })
            .collect();
        (starts, short_of_workers)
    }

    /// An attempt's answer is in: its slot is free, and the limit learns from `signal`. An
    /// endpoint that asked to slow down starts nothing for `pause`. Returns when a paused
    /// lane should be looked at again.
    pub fn answered(
        &self,
        endpoint: &EndpointId,
        started: Started,
        signal: Signal,
        pause: Option<Duration>,
    ) -> Option<Instant> {
        let mut lanes = self.lanes.lock().expect("lanes poisoned");
        let lane = lanes.get_mut(endpoint)?;
        lane.limit.learn(started, signal, lane.in_flight);
        crate::telemetry::endpoint_limit(lane.limit.current());
        lane.in_flight -= 1;
        lane.note_idle();
        pause.and_then(|pause| hold(lane, pause))
    }

    /// The endpoint is being disabled: nothing more starts for `pause` (until the disabling
    /// is written, after which claims and publishes pass it by), and what waits in its lane
    /// is returned, for its claims to be given back.
    pub fn close(&self, endpoint: &EndpointId, pause: Duration) -> (Vec<Held>, Option<Instant>) {
        let mut lanes = self.lanes.lock().expect("lanes poisoned");
        let Some(lane) = lanes.get_mut(endpoint) else {
            return (Vec::new(), None);
        };
        let waiting = lane.waiting.drain(..).collect();
        lane.note_idle();
        (waiting, hold(lane, pause))
    }

    /// An attempt that was started but not made (its lease ran short, or it was stopped).
    pub fn abandoned(&self, endpoint: &EndpointId) {
        let mut lanes = self.lanes.lock().expect("lanes poisoned");
        if let Some(lane) = lanes.get_mut(endpoint) {
            lane.in_flight -= 1;
            lane.note_idle();
        }
    }

    /// Whether `endpoint`'s lane wants a refill from the database.
    pub fn wants_refill(&self, endpoint: &EndpointId) -> bool {
        let lanes = self.lanes.lock().expect("lanes poisoned");
        lanes.get(endpoint).is_some_and(Lane::wants_refill)
    }

    /// Takes every delivery still waiting in any lane (shutting down: their claims are given
    /// back).
    pub fn take_waiting(&self) -> Vec<Held> {
        let mut lanes = self.lanes.lock().expect("lanes poisoned");
        lanes
            .values_mut()
            .flat_map(|lane| lane.waiting.drain(..))
            .collect()
    }

    /// The current limit and attempts in flight of `endpoint`, if it has a lane.
    pub fn of(&self, endpoint: &EndpointId) -> Option<(usize, usize)> {
        let lanes = self.lanes.lock().expect("lanes poisoned");
        lanes
            .get(endpoint)
            .map(|lane| (lane.limit.current(), lane.in_flight))
    }

    /// The current limit and attempts in flight of every endpoint with a lane.
    pub fn snapshot(&self) -> Vec<(EndpointId, usize, usize)> {
        let lanes = self.lanes.lock().expect("lanes poisoned");
        lanes
            .iter()
            .map(|(id, lane)| (id.clone(), lane.limit.current(), lane.in_flight))
            .collect()
    }
}

/// Starts nothing in `lane` for `pause`; returns the pause's end if it is later than before.
fn hold(lane: &mut Lane, pause: Duration) -> Option<Instant> {
    let until = Instant::now() + pause;
    let later = until > lane.held_until;
    lane.held_until = lane.held_until.max(until);
    later.then_some(until)
}

/// The time an attempt may start at a rate of `per_second` (none: now), reserving it.
fn next_start(lane: &mut Lane, per_second: Option<u16>) -> Instant {
    let now = Instant::now();
    let Some(rate) = per_second.filter(|r| *r > 0) else {
        return now;
    };
    let start = lane.next_start.max(now);
    lane.next_start = start + Duration::from_secs(1) / u32::from(rate);
    start
}
