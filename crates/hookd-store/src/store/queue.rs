//! [`DeliveryQueue`]: the deliveries table seen as the delivery engine's work queue.
//!
//! A pending delivery is due when its `next_attempt_at` has passed. Claiming one marks it
//! `sending` and pushes `next_attempt_at` to the end of a lease: a process that dies mid-attempt
//! simply lets the lease run out, and the delivery becomes due again for whoever claims next.
//! Recording the attempt ends the lease, either finished (success, or failed for good) or with
//! the next retry's due time. A record moves its delivery only while the delivery is still
//! under the lease its attempt was made under: a claimer paused past its lease (a frozen VM, a
//! lost database connection) may record long after another claim took the delivery, and its
//! late record is logged without overwriting what that claim decided.
//!
//! A claimer with room to spare may also take new deliveries as they are written (a
//! [`Handoff`]): they are stored already claimed and handed off once committed, so a fresh
//! message costs no claim at all. On SQLite the same goes for the next delivery of an ordering
//! key, offered by the record that settles the one ahead of it. Nothing else changes: the lease is the same, so is what a
//! crash leaves behind, and on PostgreSQL so are the endpoint's cap and windows across every
//! process.

use std::collections::HashMap;
use std::sync::Weak;

use async_trait::async_trait;
use hookd_core::model::{Attempt, Delivery, DeliveryStatus, Endpoint, Message};
use hookd_core::{EndpointId, MessageId, Timestamp};

use crate::StoreError;

/// A claimer that takes new deliveries the moment they are written (and on SQLite a key's next
/// the moment the one ahead settles), instead of finding them with
/// [`DeliveryQueue::claim_due`] (see [`DeliveryQueue::hand_off_new_deliveries`]).
pub trait Handoff: Send + Sync {
    /// Whether the claimer takes a new delivery to `endpoint` now. Called inside the write
    /// transaction, so it must not block; the room it holds is freed if the [`Reserved`] is
    /// dropped unstarted (the write failed, its caller went away, or on PostgreSQL the
    /// endpoint had no room left across the processes).
    fn reserve(&self, endpoint: &EndpointId) -> Option<Reserved>;

    /// The claimer's per-endpoint cap, as a claim's `per_endpoint`: on PostgreSQL, a delivery
    /// is handed off only while its endpoint has fewer in flight in every process.
    fn per_endpoint(&self) -> usize;
}

/// How a store hands new deliveries over (see [`DeliveryQueue::hand_off_new_deliveries`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoffMode {
    /// It does not: claims are the only way in.
    None,
    /// It does, and the claimer is the queue's only one (SQLite): whatever waits was refused
    /// for want of room the claimer itself holds, so a claim that finds nothing, and skips no
    /// endpoint of its own, means nothing waits until the next wake-up or retry.
    Sole,
    /// It does, but other processes claim from the same queue (PostgreSQL): a delivery may
    /// wait for room their attempts hold, and their records free it without waking this one.
    Shared,
}

/// Room a [`Handoff`] holds for one new delivery: the delivery is written claimed until
/// `lease_until`, then given to [`Reserved::start`] once committed.
pub struct Reserved {
    lease_until: Timestamp,
    start: Box<dyn FnOnce(ClaimedDelivery) + Send>,
}

impl Reserved {
    /// Room until `lease_until`; `start` takes the delivery once it is committed.
    pub fn new(
        lease_until: Timestamp,
        start: impl FnOnce(ClaimedDelivery) + Send + 'static,
    ) -> Self {
        Self {
            lease_until,
            start: Box::new(start),
        }
    }

    /// When the delivery's claim ends unless an attempt is recorded first.
    pub fn lease_until(&self) -> Timestamp {
        self.lease_until
    }

    /// Hands off the committed delivery.
    pub fn start(self, claimed: ClaimedDelivery) {
        (self.start)(claimed);
    }
}

impl std::fmt::Debug for Reserved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reserved")
            .field("lease_until", &self.lease_until)
            .finish_non_exhaustive()
    }
}

/// What to claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRequest {
    /// Deliveries due at or before this time are claimable.
    pub now: Timestamp,
    /// Claimed deliveries become due again at this time unless an attempt is recorded first.
    pub lease_until: Timestamp,
    /// At most this many deliveries in all.
    pub limit: usize,
    /// At most this many deliveries of an endpoint not named in `rooms`, oldest due first, so
    /// one endpoint's backlog cannot fill a claim.
    pub per_endpoint: usize,
    /// At most this many deliveries of each of these endpoints (the claimer's room for them;
    /// 0 leaves the endpoint alone this time).
    pub rooms: HashMap<EndpointId, usize>,
    /// The most deliveries of one endpoint in flight at once (claimed and not yet recorded),
    /// or the endpoint's own `max_concurrency` if lower. On PostgreSQL (with cluster limits,
    /// the default) a claim holds it across every process, and an endpoint's rate limit is
    /// shared by them too; where one process claims (SQLite) the claimer holds it itself.
    pub ceiling: usize,
}

impl ClaimRequest {
    /// The most deliveries of `endpoint` this claim may take.
    pub fn room(&self, endpoint: &EndpointId) -> usize {
        self.rooms
            .get(endpoint)
            .copied()
            .unwrap_or(self.per_endpoint)
    }
}

/// A delivery claimed for one attempt, with everything the attempt needs.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedDelivery {
    /// The delivery as claimed (status `sending`, `next_attempt_at` the lease's end).
    pub delivery: Delivery,
    pub message: Message,
    pub endpoint: Endpoint,
    /// Whether this attempt was asked for by hand (resend), rather than scheduled.
    pub manual: bool,
}

/// A finished attempt to record: its row for the delivery log and the delivery's next state.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptRecord {
    pub attempt: Attempt,
    pub next: Delivery,
    /// The end of the lease the attempt was made under (its claimed delivery's
    /// `next_attempt_at`). The delivery moves to `next` only if it is still `sending` under
    /// this lease; otherwise the attempt is only logged ([`Recorded::Stale`]). `None` moves it
    /// whatever its state: for history written outside the engine (imports, tests).
    pub lease: Option<Timestamp>,
    /// The endpoint asked to be left alone until then (it answered 429, 502, 503 or 504).
    /// Where several processes claim (PostgreSQL, with cluster limits), no claim takes its
    /// deliveries before that time; one process alone (SQLite) holds the endpoint itself, and
    /// nothing is stored.
    pub hold_until: Option<Timestamp>,
    /// Operational-webhook messages this attempt causes (of the operations application),
    /// written with it, each with a delivery per subscribed endpoint, exactly when the record
    /// is: none if the delivery is gone.
    pub events: Vec<Message>,
}

/// What recording one attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Written. The endpoint's current streak of failures began at `failing_since` (`None`
    /// after a success).
    Written { failing_since: Option<Timestamp> },
    /// The delivery is gone (its message or endpoint was deleted meanwhile): nothing written.
    Gone,
    /// The attempt's lease ran out and the delivery was claimed again, released or resent
    /// meanwhile: the attempt is logged, but the delivery, the failure streak and the
    /// operational webhooks are left to whoever holds it now.
    Stale,
}

/// What [`DeliveryQueue::skip`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skipped {
    /// The delivery was pending (due, retrying, or waiting its turn): it is failed now, and
    /// the next delivery of its ordering key, if any, is due.
    Skipped,
    /// An attempt holds it (`sending`): left alone.
    InFlight,
    /// It had settled already (succeeded or failed): left alone.
    Settled,
}

/// What a skip that changed nothing found: the delivery's status (`None`: there is none).
pub(crate) fn skip_refused(status: Option<i64>) -> Result<Skipped, StoreError> {
    match status.map(DeliveryStatus::from_code) {
        None => Err(StoreError::NotFound("delivery")),
        Some(DeliveryStatus::Sending) => Ok(Skipped::InFlight),
        Some(_) => Ok(Skipped::Settled),
    }
}

/// The queue operations of the delivery engine and of the API's resend and recover.
#[async_trait]
pub trait DeliveryQueue: Send + Sync {
    /// Claims due deliveries of enabled endpoints within the request's limits: the endpoints
    /// whose oldest due delivery waits longest first, each one's oldest first. Its cost grows
    /// with the number of endpoints, never with a backlog. Deliveries of disabled endpoints
    /// stay pending (nothing is lost) until the endpoint is enabled again. On PostgreSQL,
    /// concurrent claimers never get the same row.
    async fn claim_due(&self, request: &ClaimRequest) -> Result<Vec<ClaimedDelivery>, StoreError>;

    /// Records finished attempts, in one transaction, in the order they were made (their
    /// `created_at`; the batch's order for ties): for each, the attempt row, its delivery
    /// moved to `next` (status, attempt count, due time; the manual flag cleared), and the
    /// endpoint's failure streak (a success clears it, a failure starts it unless started);
    /// for a record whose lease is no longer the delivery's, the attempt row only.
    /// Answers one [`Recorded`] per record, in the batch's order. The engine records in batches: one
    /// transaction for many attempts is what keeps the database from capping deliveries/s.
    async fn record_attempts(&self, records: &[AttemptRecord])
    -> Result<Vec<Recorded>, StoreError>;

    /// Records one attempt whatever its delivery's state (no lease; see
    /// [`DeliveryQueue::record_attempts`]), for history written outside the engine. Returns
    /// when the endpoint's current streak of failures began (`None` after a success), or
    /// `NotFound("delivery")` if the delivery is gone.
    async fn record_attempt(
        &self,
        attempt: &Attempt,
        next: &Delivery,
    ) -> Result<Option<Timestamp>, StoreError> {
        let record = AttemptRecord {
            attempt: attempt.clone(),
            next: next.clone(),
            lease: None,
            hold_until: None,
            events: Vec::new(),
        };
        match self.record_attempts(std::slice::from_ref(&record)).await?[..] {
            [Recorded::Written { failing_since }] => Ok(failing_since),
            _ => Err(StoreError::NotFound("delivery")),
        }
    }

    /// Disables an enabled endpoint, noting why and when; its pending deliveries wait. In the
    /// same transaction, writes `events` (operational-webhook messages, each with a delivery per
    /// subscribed endpoint). Returns whether this call disabled it: an endpoint disabled
    /// already keeps its reason, and `events` are not written.
    async fn disable_endpoint(
        &self,
        endpoint: &EndpointId,
        reason: &str,
        at: Timestamp,
        events: &[Message],
    ) -> Result<bool, StoreError>;

    /// Queues one manual attempt of `message` to `endpoint`, due at `now`, creating the delivery
    /// if the message was never routed there. A delivery in flight is left alone (it is being
    /// sent already). A delivery with an ordering key is due at once only if no earlier
    /// delivery of its key is unsettled; otherwise it takes its turn (as the oldest waiting,
    /// it goes next). Returns whether an attempt was queued.
    async fn resend(
        &self,
        message: &MessageId,
        endpoint: &EndpointId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Re-queues an endpoint's failed deliveries of messages created in `[since, until)`, due at
    /// `now` with a fresh retry schedule (those with an ordering key one at a time per key, in
    /// message order). Returns how many. A message whose payload was
    /// expunged stays failed: there is nothing to send, and queued it would fail every attempt
    /// of its schedule, for days, and count each against the endpoint's failure streak.
    async fn recover(
        &self,
        endpoint: &EndpointId,
        since: Timestamp,
        until: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<u64, StoreError>;

    /// Gives up on a pending delivery by hand, as an operator does on a key's head that keeps
    /// failing: it is marked failed without an attempt, and the next delivery of its ordering
    /// key becomes due. `NotFound("delivery")` if the message was never routed there.
    async fn skip(
        &self,
        message: &MessageId,
        endpoint: &EndpointId,
        now: Timestamp,
    ) -> Result<Skipped, StoreError>;

    /// The delivery each `(endpoint, ordering key)` pair has queued (due, retrying or in
    /// flight), by message: what the deliveries waiting under that key wait behind.
    async fn heads_of(
        &self,
        keys: &[(EndpointId, String)],
    ) -> Result<HashMap<(EndpointId, String), MessageId>, StoreError>;

    /// Gives back claims whose attempts were cut short (a process shutting down): each delivery
    /// still `sending` under the lease it was claimed with (`claimed.next_attempt_at`) becomes
    /// `pending`, due at `now`, so any claimer takes it at once instead of after the lease.
    /// Its attempt count is unchanged: no attempt was recorded. A delivery recorded or claimed
    /// again meanwhile is left alone. Returns how many were released.
    async fn release_claims(&self, claimed: &[Delivery], now: Timestamp)
    -> Result<u64, StoreError>;

    /// From now on, offers every new delivery of a published message to `handoff` while it is
    /// written (see [`Handoff`]), replacing any earlier one. Returns how: the SQLite store's
    /// process is the queue's only claimer ([`HandoffMode::Sole`]); on PostgreSQL, processes
    /// share the queue ([`HandoffMode::Shared`]).
    fn hand_off_new_deliveries(&self, handoff: Weak<dyn Handoff>) -> HandoffMode {
        let _ = handoff;
        HandoffMode::None
    }
}
