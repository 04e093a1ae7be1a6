//! Per-endpoint lanes: each endpoint's claimed deliveries wait in its lane for one of its
//! slots, so the limits of one endpoint never hold up another.
//!
//! A lane keeps a short window of its endpoint's due deliveries claimed ahead (under their
//! leases, oldest first), so a slot freed by an answer starts the next send without a round
//! trip to the database: as many waiting as it has slots, or as it sends in
//! [`WAITING_HORIZON`] at its unloaded round trip if that is more. The window follows the
//! endpoint's rate, not only its slots: an endpoint whose slots are cut while it still answers
//! fast (a busy machine's latency looks like a queue) would otherwise send hookd's own new
//! deliveries through the database, the costlier way, just when hookd has the least time to
//! spare. How many slots it has is learned from the answers (see
//! [`crate::pipeline::adaptive`]), within the endpoint's ceiling; its `rateLimit` spaces the
//! starts out, and an endpoint that asked to slow down starts nothing until its pause is over.
//! A slot is the receiver's: it is freed the moment the answer is in, not when the attempt is
//! recorded.
//!
//! A lane takes deliveries two ways: claimed from the database, and new ones handed off as
//! they are written (see `hookd_store::Handoff`), which cost no claim. While the database holds
//! more of its endpoint's deliveries than the lane (a backlog: publishing outruns sending), the
//! part of its window waiting for a slot is shared: half for claims, which take the oldest, and
//! half for new deliveries. Claims alone would send every new delivery through the database
//! for as long as the backlog lasts; new deliveries alone would leave the oldest waiting until
//! publishing slows down.
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

/// A lane holds at least as many deliveries waiting as its endpoint answers in this long.
/// Far inside any lease (90 s by default): what waits this long is started long before its
/// lease ends.
const WAITING_HORIZON: Duration = Duration::from_millis(100);

/// A claimed delivery and its ticket in the budget of deliveries held (given back at its
/// attempt's answer, or when its claim is given back). Boxed: a held delivery is moved from
/// its claim to its lane, its start and its attempt's task, and carries its message and
/// endpoint.
pub struct Held {
    pub claimed: Box<ClaimedDelivery>,
    /// Held, not read: dropping it gives the ticket back.
    pub _ticket: OwnedSemaphorePermit,
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

/// How a held delivery came to its lane.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Claim,
    Handoff,
}

struct Lane {
    limit: AdaptiveLimit,
    /// Held, waiting for a slot, in the order they came.
    waiting: VecDeque<(Held, Source)>,
    /// Of `waiting`, those that came by a claim.
    claimed_waiting: usize,
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
    /// The most its window (slots and waiting room) grows to by its endpoint's rate: its even
    /// share of the deliveries the engine may hold, so that one endpoint's room never takes
    /// the tickets every other one needs.
    fair_share: usize,
    idle_since: Option<Instant>,
}

impl Lane {
    fn new(ceiling: usize) -> Self {
        let now = Instant::now();
        Self {
            limit: AdaptiveLimit::new(ceiling),
            waiting: VecDeque::new(),
            claimed_waiting: 0,
            reserved: 0,
            in_flight: 0,
            next_start: now,
            held_until: now,
            backlog: false,
            fair_share: 0,
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

    /// How many deliveries may wait for a slot: as many as there are slots, or as the
    /// endpoint answers in [`WAITING_HORIZON`] at its unloaded round trip if that is more,
    /// within its fair share of the budget.
    ///
    /// Not at its recent round trip: the room would swing with every busy moment, and a claim
    /// made while it was wide would take the new deliveries' share too.
    fn waiting_room(&self) -> usize {
        let slots = self.limit.current();
        match self.limit.unloaded_round_trip() {
            Some(rtt) if rtt < WAITING_HORIZON => {
                let per_horizon = WAITING_HORIZON.as_secs_f64() / rtt.as_secs_f64().max(1e-6);
                let fair = self.fair_share.saturating_sub(slots);
                slots.max((slots as f64 * per_horizon).min(fair as f64) as usize)
            }
            _ => slots,
        }
    }

    /// Its room now, for one decision: the waiting room is worked out once.
    fn shares(&self) -> Shares {
        let waiting = self.waiting_room();
        let claims = waiting.div_ceil(2);
        let window = match self.paused() {
            true => 0,
            false => (self.limit.current() + waiting).saturating_sub(self.held()),
        };
        Shares {
            window,
            claims,
            new: waiting - claims,
        }
    }

    /// How many more a claim takes now: room in the window, within the claims' share of it.
    fn room(&self) -> usize {
        let shares = self.shares();
        let share = shares.claims.saturating_sub(self.claimed_waiting);
        shares.window.min(share)
    }

    /// Whether it takes one more new delivery: room in the window and, under a backlog, within
    /// the share claims leave.
    fn takes_new(&self) -> bool {
        let shares = self.shares();
        let new_waiting = self.waiting.len() - self.claimed_waiting + self.reserved;
        shares.window > 0 && (!self.backlog || new_waiting < shares.new)
    }

    /// Whether it would take a claim's worth more: the claims' share has drained to half (so
    /// the refill arrives before it runs dry) and the database may hold more of its
    /// deliveries.
    fn wants_refill(&self) -> bool {
        self.backlog && !self.paused() && 2 * self.claimed_waiting <= self.shares().claims
    }

    /// The next delivery waiting, keeping count of the claimed ones.
    fn pop(&mut self) -> Option<Held> {
        let (held, source) = self.waiting.pop_front()?;
        if source == Source::Claim {
            self.claimed_waiting -= 1;
        }
        Some(held)
    }

    /// Every delivery waiting.
    fn drain_waiting(&mut self) -> impl Iterator<Item = Held> + '_ {
        self.claimed_waiting = 0;
        self.waiting.drain(..).map(|(held, _)| held)
    }

    fn note_idle(&mut self) {
        self.idle_since = (self.held() == 0).then(Instant::now);
    }
}

/// The lanes by endpoint. Hashed with foldhash: endpoint ids are hookd's own random ids, and
/// a lane is looked up several times a delivery.
type ByEndpoint = foldhash::HashMap<EndpointId, Lane>;

/// A lane's room at one instant.
struct Shares {
    /// How many more deliveries it holds at most: its slots and its waiting room.
    window: usize,
    /// The claims' share of the deliveries waiting: the larger half.
    claims: usize,
    /// New deliveries' share of them under a backlog: the rest.
    new: usize,
}

/// Every endpoint's lane.
pub struct Lanes {
    /// The server's ceiling on any endpoint's attempts in flight.
    ceiling: usize,
    /// The deliveries the engine may hold, which the lanes' waiting rooms share.
    budget: usize,
    lanes: Mutex<ByEndpoint>,
}

impl Lanes {
    /// Lanes of at most `ceiling` slots each, their waiting rooms sharing `budget`.
    pub fn new(ceiling: usize, budget: usize) -> Self {
        Self {
            ceiling: ceiling.max(1),
            budget,
            lanes: Mutex::default(),
        }
    }

    /// `endpoint`'s lane, made (and every lane's fair share set again) if it has none.
    fn lane<'a>(
        &self,
        lanes: &'a mut ByEndpoint,
        endpoint: &EndpointId,
        ceiling: usize,
    ) -> &'a mut Lane {
        if !lanes.contains_key(endpoint) {
            lanes.insert(endpoint.clone(), Lane::new(ceiling));
            self.share_budget(lanes);
        }
        lanes.get_mut(endpoint).expect("just made")
    }

    /// Sets every lane's fair share of the budget.
    fn share_budget(&self, lanes: &mut ByEndpoint) {
        let fair_share = self.budget / lanes.len().max(1);
        for lane in lanes.values_mut() {
            lane.fair_share = fair_share;
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
        let before = lanes.len();
        lanes.retain(|_, lane| {
            lane.idle_since
                .is_none_or(|since| now.duration_since(since) < FORGET_AFTER)
                || lane.paused()
        });
        if lanes.len() != before {
            self.share_budget(&mut lanes);
        }
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
    /// has none for a new delivery (see [`Lane::takes_new`]); a lane without notes that work
    /// waits for it.
    pub fn reserve(&self, endpoint: &EndpointId) -> bool {
        let mut lanes = self.lanes.lock().expect("lanes poisoned");
        let lane = self.lane(&mut lanes, endpoint, self.ceiling);
        if !lane.takes_new() {
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
        let lane = self.lane(&mut lanes, &endpoint.id, ceiling);
        lane.limit.set_ceiling(ceiling);
        let source = if reserved {
            lane.reserved -= 1;
            Source::Handoff
        } else {
            lane.claimed_waiting += 1;
            Source::Claim
        };
        lane.idle_since = None;
        lane.waiting.push_back((held, source));
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
            let held = lane.pop().expect("not empty");
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
        let waiting = lane.drain_waiting().collect();
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
        lanes.values_mut().flat_map(Lane::drain_waiting).collect()
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::Semaphore;

    use super::*;
    use crate::pipeline::adaptive::Signal;
    use crate::pipeline::attempt::tests::claimed;

    /// A delivery to `endpoint`, held under a ticket of `tickets`.
    fn held(endpoint: &EndpointId, tickets: &Arc<Semaphore>) -> Held {
        let mut claimed = claimed(0);
        claimed.endpoint.id = endpoint.clone();
        claimed.delivery.endpoint_id = endpoint.clone();
        let ticket = tickets.clone().try_acquire_owned().unwrap();
        Held {
            claimed: Box::new(claimed),
            _ticket: ticket,
        }
    }

    /// Deliveries handed off to `endpoint` as they are written: how many were taken of `n`.
    fn hand_off(lanes: &Lanes, endpoint: &EndpointId, tickets: &Arc<Semaphore>, n: usize) -> usize {
        let mut taken = 0;
        for _ in 0..n {
            if lanes.reserve(endpoint) {
                lanes.admit(held(endpoint, tickets), true);
                taken += 1;
            }
        }
        taken
    }

    /// Starts what the lane may start; their `Started`s.
    fn start_all(lanes: &Lanes, endpoint: &EndpointId) -> Vec<Started> {
        let workers = Arc::new(Semaphore::new(1_000));
        let (starts, _) = lanes.next_starts(
            endpoint,
            || workers.clone().try_acquire_owned().ok(),
            |_| None,
        );
        starts.into_iter().map(|s| s.started).collect()
    }

    /// A lane at the initial limit, four slots busy and its window full of new deliveries,
    /// one more refused (so the database holds some: a backlog).
    fn lane_behind_a_backlog() -> (Lanes, EndpointId, Arc<Semaphore>, Vec<Started>) {
        let (lanes, endpoint) = (
            Lanes::new(64, 1_000),
            EndpointId::from_stored("ep_1".into()),
        );
        let tickets = Arc::new(Semaphore::new(1_000));
        assert_eq!(INITIAL_LIMIT, 4);
        assert_eq!(
            hand_off(&lanes, &endpoint, &tickets, 9),
            8,
            "the window is 2 × 4"
        );
        let started = start_all(&lanes, &endpoint);
        assert_eq!(started.len(), 4);
        (lanes, endpoint, tickets, started)
    }

    #[test]
    fn without_a_backlog_new_deliveries_take_the_whole_window() {
        let (lanes, endpoint) = (
            Lanes::new(64, 1_000),
            EndpointId::from_stored("ep_1".into()),
        );
        let tickets = Arc::new(Semaphore::new(1_000));
        assert_eq!(hand_off(&lanes, &endpoint, &tickets, 8), 8);
        assert!(!lanes.wants_refill(&endpoint), "nothing was refused");
    }

    /// A lane at the initial limit whose endpoint answered one attempt in `rtt`.
    fn lane_answered_in(rtt: Duration) -> (Lanes, EndpointId, Arc<Semaphore>) {
        let (lanes, endpoint) = (
            Lanes::new(64, 1_000),
            EndpointId::from_stored("ep_1".into()),
        );
        let tickets = Arc::new(Semaphore::new(1_000));
        assert_eq!(hand_off(&lanes, &endpoint, &tickets, 1), 1);
        let started = start_all(&lanes, &endpoint);
        lanes.answered(&endpoint, started[0], Signal::Answered(rtt), None);
        (lanes, endpoint, tickets)
    }

    #[test]
    fn a_fast_endpoint_holds_what_it_answers_in_the_horizon_waiting() {
        let (lanes, endpoint, tickets) = lane_answered_in(Duration::from_millis(10));
        // Four slots answering every 10 ms send 40 in 100 ms.
        assert_eq!(hand_off(&lanes, &endpoint, &tickets, 50), 4 + 40);
    }

    #[test]
    fn lanes_share_the_deliveries_the_engine_may_hold() {
        let tickets = Arc::new(Semaphore::new(1_000));
        let lanes = Lanes::new(64, 100);
        let (a, b) = (
            EndpointId::from_stored("a".into()),
            EndpointId::from_stored("b".into()),
        );
        assert_eq!(hand_off(&lanes, &a, &tickets, 1), 1);
        assert_eq!(hand_off(&lanes, &b, &tickets, 1), 1);
        let started = start_all(&lanes, &a);
        lanes.answered(
            &a,
            started[0],
            Signal::Answered(Duration::from_millis(1)),
            None,
        );
        // Four slots answering every millisecond send 400 in 100 ms, but two lanes share 100:
        // 4 in flight and 46 waiting.
        assert_eq!(hand_off(&lanes, &a, &tickets, 100), 50);
    }

    #[test]
    fn a_slow_endpoint_holds_no_more_waiting_than_its_slots() {
        let (lanes, endpoint, tickets) = lane_answered_in(Duration::from_secs(1));
        assert_eq!(hand_off(&lanes, &endpoint, &tickets, 50), 2 * 4);
    }

    #[test]
    fn under_a_backlog_claims_and_new_deliveries_each_keep_half_the_waiting_room() {
        let (lanes, endpoint, tickets, started) = lane_behind_a_backlog();
        let answer = |started| lanes.answered(&endpoint, started, Signal::None, None);
        // Two answers free two places: the claims' share, not new deliveries'.
        for s in &started[..2] {
            answer(*s);
        }
        assert!(lanes.wants_refill(&endpoint));
        assert_eq!(hand_off(&lanes, &endpoint, &tickets, 1), 0);
        assert_eq!(lanes.rooms().get(&endpoint), Some(&2));
        for _ in 0..2 {
            lanes.admit(held(&endpoint, &tickets), false);
        }
        assert_eq!(lanes.rooms().get(&endpoint), Some(&0));
        assert!(!lanes.wants_refill(&endpoint));
        // The new ones came first and start first; the two claimed wait, and new deliveries
        // may wait beside them again, as many as their share.
        answer(started[2]);
        answer(started[3]);
        assert_eq!(start_all(&lanes, &endpoint).len(), 4);
        assert_eq!(hand_off(&lanes, &endpoint, &tickets, 3), 2);
        assert_eq!(lanes.rooms().get(&endpoint), Some(&0));
    }

    #[test]
    fn under_a_backlog_a_new_delivery_is_taken_while_below_its_share() {
        let (lanes, endpoint, tickets, started) = lane_behind_a_backlog();
        for s in started {
            lanes.answered(&endpoint, s, Signal::None, None);
        }
        // Four slots free: the four new ones waiting start, and the lane is empty but for
        // them; new deliveries may wait again up to their share.
        let started = start_all(&lanes, &endpoint);
        assert_eq!(started.len(), 4);
        assert_eq!(hand_off(&lanes, &endpoint, &tickets, 4), 2);
        assert_eq!(lanes.rooms().get(&endpoint), Some(&2));
    }
}
