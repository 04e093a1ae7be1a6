//! The engine's loop: claim due deliveries into their endpoints' lanes, run each attempt under
//! its endpoint's limits, record it.
//!
//! One task claims; claimed deliveries wait in their endpoint's lane (see [`crate::pipeline::lanes`]),
//! which starts each as soon as the endpoint has a free slot and a global worker is free. An
//! attempt task sends, hands its slot and worker back the moment the answer is in, and gives
//! its verdict to the recorder (see [`crate::pipeline::recorder`]), which writes finished attempts in
//! batches off the send path. A lane keeps a window of its endpoint's due deliveries claimed
//! ahead, so a busy endpoint's next send needs no round trip to the database; the loop claims
//! again when a lane has drained half its window and more may wait for it, when it is woken
//! (by the API: "new messages"; by a recorded retry), or at the poll interval (retries coming
//! due). Claims are leases, so a process that dies mid-attempt loses nothing: its deliveries
//! become due again when their lease ends. What a crash can send twice is bounded by the
//! deliveries held (claimed and not yet recorded): at most twice the worker budget.
//!
//! New deliveries need no claim: the engine takes them as they are written (see
//! [`hookd_store::Handoff`]), already claimed, whenever their endpoint's lane has room, and
//! queues them in the lane once committed. Claims then find only what had no room, retries and
//! recovered deliveries. On PostgreSQL, where several processes share the queue, a delivery may
//! also wait for room another process's attempts hold, freed by their records without a
//! wake-up here; so once a claim finds nothing, finished attempts make the engine look again a
//! little later (`RECHECK`), not at each one.
//!
//! Shutting down, the engine stops claiming, gives back the claims still waiting in lanes, and
//! gives the attempts in flight a grace period to finish and be recorded; the claims of those
//! still running at its end are given back (due at once), so another process need not wait
//! out their leases.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use hookd_core::model::Delivery;
use hookd_core::{Clock, Concurrency, EndpointId, EndpointLoad};
use hookd_store::{ClaimRequest, ClaimedDelivery, Handoff, Handover, Reserved, Store};
use hookd_vault::{Keyring, OpenedKeys};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::time::MissedTickBehavior;
use tracing::Instrument;

use crate::http::{SendError, SendOutcome, WebhookSender};
use crate::pipeline::adaptive::Signal;
use crate::pipeline::attempt::{self, Happened, Verdict};
use crate::pipeline::lanes::{Held, Lanes, Start};
use crate::pipeline::operations::Operations;
use crate::pipeline::recorder::{Finished, Recorder};
use crate::pipeline::schedule::RetrySchedule;
use crate::telemetry;

/// How the engine behaves.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Attempts in flight across all endpoints. Twice as many deliveries may be held at once
    /// (claimed ahead, in flight, or waiting for their record).
    pub workers: usize,
    /// The most attempts in flight to any one endpoint (an endpoint's own `maxConcurrency` may
    /// set fewer); within it, each endpoint's limit adapts to its answers. On PostgreSQL it
    /// holds across every process.
    pub endpoint_max_concurrency: usize,
    /// Attempt timeout for endpoints that do not set their own (the spec asks 15..30 s).
    pub attempt_timeout: Duration,
    /// How long a claim lasts before another claimer may take the delivery again. Attempt
    /// timeouts are capped at a third of it: a claimed delivery may wait behind up to two
    /// rounds of its endpoint's attempts before its own, and must still end inside its lease.
    pub lease: Duration,
    /// How often to look for retries coming due when nothing wakes the engine.
    pub poll_interval: Duration,
    pub schedule: RetrySchedule,
    /// An endpoint failing without a single success for this long is disabled.
    pub disable_after: Duration,
    /// A delivery's attempts failing this many times in a row send the
    /// `message.attempt.failing` operational webhook (Svix: the fourth); 0 never does.
    pub failing_after: u32,
    /// Also send `svix-id`, `svix-timestamp` and `svix-signature`.
    pub svix_headers: bool,
    /// The master keys that open endpoints' sealed signing keys. The default is a new
    /// in-memory key (for tests); `hookd serve` gives the configured one.
    pub keyring: Arc<Keyring>,
    /// On shutdown, how long attempts in flight may go on to finish and be recorded before
    /// they are cut short and their claims given back.
    pub shutdown_grace: Duration,
    /// Adds a W3C `traceparent` header (the attempt's span) to every delivery, so receivers
    /// can join the trace.
    pub traceparent: Option<telemetry::Traceparent>,
}

impl EngineConfig {
    /// [`Self::workers`] unless set: attempts in flight in all.
    pub const DEFAULT_WORKERS: usize = 512;
    /// [`Self::endpoint_max_concurrency`] unless set (`hookd serve --help` says why so high).
    pub const DEFAULT_ENDPOINT_MAX_CONCURRENCY: usize = 512;
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            workers: Self::DEFAULT_WORKERS,
            endpoint_max_concurrency: Self::DEFAULT_ENDPOINT_MAX_CONCURRENCY,
            attempt_timeout: Duration::from_secs(15),
            lease: Duration::from_secs(90),
            poll_interval: Duration::from_secs(1),
            schedule: RetrySchedule::default(),
            disable_after: Duration::from_secs(5 * 24 * 3600),
            failing_after: 4,
            svix_headers: false,
            keyring: Arc::new(Keyring::ephemeral()),
            shutdown_grace: Duration::from_secs(10),
            traceparent: None,
        }
    }
}

/// The delivery engine. Start it with [`Engine::run`]; wake it through [`Engine::waker`].
pub struct Engine {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    sender: WebhookSender,
    config: EngineConfig,
    /// Work was queued in the database (by the API, a retry, another process).
    wake: Arc<Notify>,
    /// Room was freed (attempts recorded, a lane drained half its window): claim if work
    /// waits.
    freed: Arc<Notify>,
    /// Whether the database may hold due deliveries no claim has found yet. Starts true.
    maybe_queued: AtomicBool,
    /// Turns true when the engine stops claiming: new deliveries are no longer taken either.
    stopping: AtomicBool,
    /// The engine itself, for the attempts of the deliveries it takes as they are written.
    me: Weak<Self>,
    lanes: Lanes,
    /// Attempts in flight, across endpoints.
    workers: Arc<Semaphore>,
    /// Deliveries held: claimed and not yet recorded or given back.
    tickets: Arc<Semaphore>,
    /// Endpoints with attempts to start but no worker free, in the order they asked.
    starved: Mutex<VecDeque<EndpointId>>,
    /// Finished attempts, to the recorder.
    finished: mpsc::UnboundedSender<Finished>,
    /// The recorder's end, until [`Engine::run`] starts it.
    recorder: Mutex<Option<(Recorder, mpsc::UnboundedReceiver<Finished>)>>,
    /// Turns true when the shutdown grace is over: attempts still running stop.
    cut_short: watch::Sender<bool>,
    /// The claims of the attempts that stopped, to give back.
    abandoned: Mutex<Vec<Delivery>>,
    /// Endpoints' signing keys, opened under [`EngineConfig::keyring`].
    opened_keys: OpenedKeys,
}

impl Engine {
    /// An engine over `store`, woken through `wake` (the handle the API notifies).
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        sender: WebhookSender,
        config: EngineConfig,
        wake: Arc<Notify>,
    ) -> Arc<Self> {
        let (finished, to_record) = mpsc::unbounded_channel();
        let freed = Arc::new(Notify::new());
        let recorder = Recorder {
            store: store.clone(),
            wake: wake.clone(),
            freed: freed.clone(),
            disable_after: config.disable_after,
            operations: Operations::new(store.clone()),
        };
        let workers = config.workers.max(1);
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            freed,
            maybe_queued: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
            finished,
            recorder: Mutex::new(Some((recorder, to_record))),
            cut_short: watch::Sender::new(false),
            abandoned: Mutex::default(),
            opened_keys: OpenedKeys::new(config.keyring.clone()),
            lanes: Lanes::new(config.endpoint_max_concurrency),
            workers: Arc::new(Semaphore::new(workers)),
            tickets: Arc::new(Semaphore::new(held_budget(workers))),
            starved: Mutex::default(),
            store,
            clock,
            sender,
            config,
            wake,
        })
    }

    /// The handle that wakes the engine when new work is written.
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Each endpoint with work here: its id, its current concurrency limit and its attempts
    /// in flight.
    pub fn endpoint_concurrency(&self) -> Vec<(EndpointId, usize, usize)> {
        self.lanes.snapshot()
    }

    /// Claims and dispatches until `shutdown` completes, then lets the attempts in flight
    /// finish and be recorded for up to [`EngineConfig::shutdown_grace`], and gives back the
    /// claims of those still running after it. Returns when every attempt is recorded or
    /// given back.
    ///
    /// # Panics
    /// If called twice.
    pub async fn run(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        let (recorder, to_record) = self
            .recorder
            .lock()
            .expect("recorder slot poisoned")
            .take()
            .expect("an engine runs once");
        // It ends once the engine and every attempt task are gone, after their last write.
        tokio::spawn(recorder.run(to_record));
        let me: Weak<dyn Handoff> = Arc::downgrade(&self) as Weak<Self>;
        let handover = self.store.hand_off_new_deliveries(me);
        tokio::pin!(shutdown);
        // A schedule of its own, not a sleep restarted at every wake-up: finished attempts
        // wake the loop all the time under load, and must not keep the poll from coming.
        let period = self.config.poll_interval.max(Duration::from_millis(1));
        let mut poll = tokio::time::interval(period);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // Shared handover: when a look again at the queue is due (see `RECHECK`).
        let mut recheck = None;
        loop {
            let claimed_all = self.clone().dispatch_due(handover).await;
            if claimed_all {
                continue;
            }
            tokio::select! {
                () = &mut shutdown => break,
                () = self.wake.notified() => self.maybe_queued.store(true, Ordering::Release),
                () = self.freed.notified() => {
                    if handover == Handover::Shared && !self.maybe_queued.load(Ordering::Acquire) {
                        recheck.get_or_insert_with(|| tokio::time::Instant::now() + RECHECK);
                    }
                }
                () = sleep_until(recheck), if recheck.is_some() => {
                    recheck = None;
                    self.maybe_queued.store(true, Ordering::Release);
                }
                _ = poll.tick() => {
                    // Retries come due, leases run out.
                    self.maybe_queued.store(true, Ordering::Release);
                    self.sample_load();
                }
            }
        }
        self.stopping.store(true, Ordering::Release);
        self.drain().await;
    }

    /// Sets the engine's load gauges (see [`telemetry::engine_load`]).
    fn sample_load(&self) {
        let endpoints: Vec<(usize, usize)> = self
            .lanes
            .snapshot()
            .into_iter()
            .map(|(_, limit, in_flight)| (limit, in_flight))
            .collect();
        let workers = self.config.workers.max(1);
        telemetry::engine_load(
            &endpoints,
            workers - self.workers.available_permits(),
            held_budget(workers) - self.tickets.available_permits(),
        );
    }

    /// Gives back the claims waiting in lanes, waits (up to the grace) until every attempt in
    /// flight is recorded, then stops the attempts still running and releases their claims.
    async fn drain(&self) {
        let budget = held_budget(self.config.workers.max(1));
        let waiting = self.lanes.take_waiting();
        if !waiting.is_empty() {
            let deliveries: Vec<Delivery> =
                waiting.iter().map(|h| h.claimed.delivery.clone()).collect();
            self.release(&deliveries, "claimed ahead and not started")
                .await;
        }
        drop(waiting);
        let busy = budget - self.tickets.available_permits();
        if busy > 0 {
            tracing::info!(attempts = busy, grace = ?self.config.shutdown_grace, "stopped claiming; waiting for the attempts in flight");
        }
        let all_done = tokio::time::timeout(
            self.config.shutdown_grace,
            self.tickets.acquire_many(budget as u32),
        )
        .await;
        if all_done.is_ok() {
            return;
        }
        self.cut_short.send_replace(true);
        // Stopped attempts give their tickets back at once; finished ones once recorded.
        let _all = self.tickets.acquire_many(budget as u32).await;
        let abandoned = std::mem::take(&mut *self.abandoned.lock().expect("abandoned poisoned"));
        self.release(
            &abandoned,
            "still running after the shutdown grace were stopped",
        )
        .await;
    }

    /// Gives back the claims of deliveries not attempted: due at once, for any claimer.
    async fn release(&self, deliveries: &[Delivery], what: &str) {
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

    /// Claims due work into the lanes, within their rooms and the deliveries the engine may
    /// hold, and starts what the lanes may start. Returns whether the claim was full, i.e.
    /// more work may be waiting. `handover`: whether new deliveries come through [`Handoff`],
    /// so that a claim that finds nothing means nothing waits, at least until a wake-up (or,
    /// shared, until attempts finish; see `RECHECK`).
    async fn dispatch_due(self: Arc<Self>, handover: Handover) -> bool {
        if !self.maybe_queued.swap(false, Ordering::AcqRel) && !self.lanes.any_wants_refill() {
            return false;
        }
        let free = self.tickets.available_permits();
        // Every freed ticket could wake a claim. When nearly all are held, claiming for each
        // as it frees would cost a database write per delivery; waiting until a sixteenth are
        // free claims in batches, and only under saturation, where the wait is short beside
        // the queue anyway.
        if free < (held_budget(self.config.workers.max(1)) / 16).max(1) {
            self.maybe_queued.store(true, Ordering::Release);
            return false;
        }
        // When new deliveries are handed over, a claim leaves them half the tickets: one in
        // flight (on PostgreSQL, milliseconds) would otherwise leave a delivery written
        // meanwhile no room, to wait for a claim of its own. A full claim is followed by the
        // next at once, so a backlog loses nothing.
        let asked = match handover {
            Handover::None => free,
            Handover::Sole | Handover::Shared => free.div_ceil(2),
        };
        let Ok(mut tickets) = self.tickets.clone().try_acquire_many_owned(asked as u32) else {
            self.maybe_queued.store(true, Ordering::Release);
            return false;
        };
        let now = self.clock.now();
        let rooms = self.lanes.rooms();
        let request = ClaimRequest {
            now,
            lease_until: now.plus(self.config.lease),
            limit: asked,
            per_endpoint: self.lanes.fresh_room(),
            rooms,
            ceiling: self.config.endpoint_max_concurrency,
        };
        let started = Instant::now();
        let span = tracing::debug_span!(
            "claim",
            hookd.asked = asked,
            hookd.claimed = tracing::field::Empty
        );
        let claimed = match self
            .store
            .claim_due(&request)
            .instrument(span.clone())
            .await
        {
            Ok(claimed) => {
                span.record("hookd.claimed", claimed.len());
                telemetry::store_write("claim", claimed.len(), started.elapsed());
                claimed
            }
            Err(error) => {
                tracing::warn!(%error, "cannot claim deliveries; retrying after the poll interval");
                return false;
            }
        };
        let full = claimed.len() == asked;
        if full || (!claimed.is_empty() && handover == Handover::None) {
            self.maybe_queued.store(true, Ordering::Release);
        }
        let mut took: HashMap<EndpointId, usize> = HashMap::new();
        for delivery in claimed {
            *took.entry(delivery.endpoint.id.clone()).or_default() += 1;
            let ticket = tickets
                .split(1)
                .expect("claims never exceed the tickets taken");
            self.lanes.admit(
                Held {
                    claimed: delivery,
                    ticket,
                },
                false,
            );
        }
        self.lanes.claimed(&request.rooms, &took);
        for endpoint in took.keys() {
            self.pump(endpoint);
        }
        full
    }

    /// Starts what `endpoint`'s lane may start now.
    fn pump(self: &Arc<Self>, endpoint: &EndpointId) {
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
    fn pump_starved(self: &Arc<Self>) {
        let mut seen = HashSet::new();
        while self.workers.available_permits() > 0 {
            let next = self.starved.lock().expect("starved poisoned").pop_front();
            let Some(endpoint) = next else { return };
            if seen.insert(endpoint.clone()) {
                self.pump(&endpoint);
            }
        }
    }

    async fn attempt(self: Arc<Self>, start: Start) {
        let Start {
            held,
            started,
            at,
            worker,
        } = start;
        let endpoint = held.claimed.endpoint.id.clone();
        let mut cut_short = self.cut_short.subscribe();
        let sent = tokio::select! {
            sent = async {
                tokio::time::sleep_until(at).await;
                if self.would_outlive_its_lease(&held.claimed) {
                    return None;
                }
                Some(self.send(&held.claimed).instrument(attempt_span(&held.claimed)).await)
            } => sent,
            Ok(_) = cut_short.wait_for(|stop| *stop) => {
                // Shutting down past the grace: nothing recorded, the claim is given back.
                self.lanes.abandoned(&endpoint);
                self.abandoned.lock().expect("abandoned poisoned").push(held.claimed.delivery);
                return;
            }
        };
        let Some((verdict, signal)) = sent else {
            self.lanes.abandoned(&endpoint);
            drop(worker);
            self.pump(&endpoint);
            self.give_back(held.claimed.delivery).await;
            return;
        };
        // The slot and the worker are free the moment the answer is in; the delivery stays
        // leased (and its ticket held) until its record is written.
        let mut resume = self
            .lanes
            .answered(&endpoint, started, signal, verdict.slow_down);
        drop(worker);
        if verdict.disable.is_some() {
            let (waiting, until) = self.lanes.close(&endpoint, CLOSING);
            resume = until.or(resume);
            let deliveries: Vec<Delivery> =
                waiting.iter().map(|h| h.claimed.delivery.clone()).collect();
            if !deliveries.is_empty() {
                self.release(&deliveries, "waiting for an endpoint being disabled")
                    .await;
            }
        }
        if let Some(resume) = resume {
            let engine = self.clone();
            let endpoint = endpoint.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(resume).await;
                engine.pump(&endpoint);
            });
        }
        self.pump(&endpoint);
        self.pump_starved();
        if self.lanes.wants_refill(&endpoint) {
            self.freed.notify_one();
        }
        telemetry::settled(verdict.next.status);
        let finished = Finished {
            verdict,
            _ticket: held.ticket,
        };
        if let Err(unsent) = self.finished.send(finished) {
            let attempt = &unsent.0.verdict.attempt;
            tracing::warn!(message_id = %attempt.message_id, endpoint_id = %attempt.endpoint_id, attempt_id = %attempt.id, "the recorder has stopped; the attempt will be made again");
        }
    }

    /// The attempt's timeout: the endpoint's own or the engine's, within a third of the lease.
    fn timeout(&self, claimed: &ClaimedDelivery) -> Duration {
        claimed
            .endpoint
            .timeout_secs
            .map_or(self.config.attempt_timeout, |s| {
                Duration::from_secs(u64::from(s))
            })
            .min(self.config.lease / 3)
    }

    /// Whether an attempt started now could still run when its claim's lease ends. A delivery
    /// waits in its endpoint's lane after its claim, and may wait that long (a low
    /// `rateLimit`, a receiver that asked for a pause). Once the lease is over, another claim
    /// may take the delivery, and its message would be in flight twice.
    fn would_outlive_its_lease(&self, claimed: &ClaimedDelivery) -> bool {
        let lease_until = claimed.delivery.next_attempt_at;
        lease_until.is_some_and(|end| self.clock.now().plus(self.timeout(claimed)) > end)
    }

    /// Gives back the claim of a delivery not attempted: due at once, for the next claim.
    async fn give_back(&self, delivery: Delivery) {
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

    /// Makes the attempt; its verdict, and what its answer says of the endpoint's capacity.
    async fn send(&self, claimed: &ClaimedDelivery) -> (Verdict, Signal) {
        let started = self.clock.now();
        let jitter = random_fraction();
        let (schedule, failing_after) = (&self.config.schedule, self.config.failing_after);
        let timeout = self.timeout(claimed);
        let keys = &self.opened_keys;
        match attempt::request(claimed, keys, started, timeout, self.config.svix_headers) {
            Ok(mut request) => {
                let traceparent = self.config.traceparent.as_ref().and_then(|t| (t.0)());
                if let Some(value) = traceparent {
                    request.headers.push(("traceparent".to_owned(), value));
                }
                let outcome = self.sender.send(request).await;
                let verdict = attempt::judge(
                    claimed,
                    Happened::Sent(&outcome),
                    self.clock.now(),
                    schedule,
                    failing_after,
                    jitter,
                );
                made(&verdict, telemetry::outcome(&outcome), outcome.duration);
                (verdict, signal(&outcome))
            }
            Err(error) => {
                let verdict = attempt::judge(
                    claimed,
                    Happened::NotSent(&error),
                    started,
                    schedule,
                    failing_after,
                    jitter,
                );
                made(&verdict, telemetry::NOT_SENT, Duration::ZERO);
                (verdict, Signal::None)
            }
        }
    }
}

impl EndpointLoad for Engine {
    fn concurrency(&self, endpoint: &EndpointId) -> Option<Concurrency> {
        let (limit, in_flight) = self.lanes.of(endpoint)?;
        Some(Concurrency { limit, in_flight })
    }
}

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
        self.engine.lanes.admit(Held { claimed, ticket }, true);
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

/// Deliveries an engine of `workers` may hold at once: claimed ahead, in flight or waiting
/// for their record. Bounds its memory, and what a crash can send twice.
fn held_budget(workers: usize) -> usize {
    2 * workers
}

/// What an attempt's outcome says of its endpoint's capacity (see [`crate::pipeline::adaptive`]).
fn signal(outcome: &SendOutcome) -> Signal {
    match (outcome.status, &outcome.error) {
        (Some(429 | 502 | 503 | 504), _) => Signal::Overloaded,
        (Some(_), _) => Signal::Answered(outcome.duration),
        (None, Some(SendError::Timeout | SendError::Connect(_) | SendError::Request(_))) => {
            Signal::Overloaded
        }
        (None, _) => Signal::None,
    }
}

/// How long an endpoint being disabled (it answered `410 Gone`) starts nothing, so that no
/// attempt starts between the answer and the write that disables it.
const CLOSING: Duration = Duration::from_secs(10);

/// With a shared handover (PostgreSQL), how long after a claim that found nothing the engine
/// looks again once attempts finish. What waits then was refused for want of room at its
/// endpoint, perhaps held by another process's attempts, whose records free it without a
/// wake-up here; looking at every finished attempt would cost a claim each, mostly empty
/// once new deliveries are handed over.
const RECHECK: Duration = Duration::from_millis(50);

/// Completes at `deadline`; never without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The span of one attempt (for traces: `--otlp-endpoint`), named by what it is for; [`made`]
/// adds what came of it. Never the payload, the URL or a header.
fn attempt_span(claimed: &ClaimedDelivery) -> tracing::Span {
    tracing::debug_span!(
        "attempt",
        hookd.message_id = %claimed.message.id,
        hookd.endpoint_id = %claimed.endpoint.id,
        hookd.app_id = %claimed.message.app_id,
        hookd.attempt_id = tracing::field::Empty,
        hookd.outcome = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
    )
}

/// Counts an attempt and leaves its log line (and its span's fields).
fn made(verdict: &Verdict, outcome: &'static str, took: Duration) {
    telemetry::attempt(outcome, took);
    let span = tracing::Span::current();
    span.record(
        "hookd.attempt_id",
        tracing::field::display(&verdict.attempt.id),
    );
    span.record("hookd.outcome", outcome);
    span.record(
        "http.response.status_code",
        verdict.attempt.response_status_code,
    );
    tracing::debug!(
        message_id = %verdict.attempt.message_id,
        endpoint_id = %verdict.attempt.endpoint_id,
        attempt_id = %verdict.attempt.id,
        outcome,
        status = verdict.attempt.response_status_code,
        duration_ms = took.as_millis() as u64,
        next = verdict.next.status.text(),
        "attempt made"
    );
}

/// A random number in `[0, 1)` for jitter.
fn random_fraction() -> f64 {
    rand::RngExt::random(&mut rand::rng())
}
