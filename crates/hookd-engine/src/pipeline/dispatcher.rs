//! The engine's loop: claim due deliveries into their endpoints' lanes, run each attempt under
//! its endpoint's limits, record it.
//!
//! One task claims; claimed deliveries wait in their endpoint's lane (see `lanes`),
//! which starts each as soon as the endpoint has a free slot and a global worker is free. An
//! attempt task sends, hands its slot and worker back the moment the answer is in, and gives
//! its verdict to the recorder (see `recorder`), which writes finished attempts in
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
//! This file holds the [`Engine`] and its loop (claiming, waking, polling). The attempt itself
//! runs in `send`; starting held deliveries and giving claims back (shutdown included) is in
//! `leases`; taking new deliveries as they are written in `handoff`; the settings in
//! [`super::config`].

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use hookd_core::model::Delivery;
use hookd_core::{Clock, Concurrency, EndpointId, EndpointLoad};
use hookd_store::{ClaimRequest, Handoff, HandoffMode, Store};
use hookd_vault::OpenedKeys;
use tokio::sync::{Notify, Semaphore, mpsc, watch};
use tokio::time::MissedTickBehavior;
use tracing::Instrument;

use crate::http::WebhookSender;
use crate::pipeline::config::EngineConfig;
use crate::pipeline::destinations::Sinks;
use crate::pipeline::lanes::{Held, Lanes};
use crate::pipeline::operations::Operations;
use crate::pipeline::recorder::{Finished, Recorder};
use crate::telemetry::{self, AttemptMetrics};

/// The delivery engine. Start it with [`Engine::run`]; wake it through [`Engine::waker`].
pub struct Engine {
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) sender: WebhookSender,
    pub(super) config: EngineConfig,
    /// Work was queued in the database (by the API, a retry, another process).
    pub(super) wake: Arc<Notify>,
    /// Room was freed (attempts recorded, a lane drained half its window): claim if work
    /// waits.
    pub(super) freed: Arc<Notify>,
    /// Whether the database may hold due deliveries no claim has found yet. Starts true.
    pub(super) maybe_queued: AtomicBool,
    /// Turns true when the engine stops claiming: new deliveries are no longer taken either.
    pub(super) stopping: AtomicBool,
    /// The engine itself, for the attempts of the deliveries it takes as they are written.
    pub(super) me: Weak<Self>,
    pub(super) lanes: Lanes,
    /// Attempts in flight, across endpoints.
    pub(super) workers: Arc<Semaphore>,
    /// Deliveries held with their messages: claimed ahead, being written by a publish, or in
    /// flight, until answered or given back.
    pub(super) tickets: Arc<Semaphore>,
    /// Attempts sent and not yet recorded: in flight, or answered and waiting for their
    /// record (see `super::recorder`).
    pub(super) unrecorded: Arc<Semaphore>,
    /// Endpoints with attempts to start but no worker free, in the order they asked.
    pub(super) starved: Mutex<VecDeque<EndpointId>>,
    /// Finished attempts, to the recorder.
    pub(super) finished: mpsc::UnboundedSender<Finished>,
    /// The recorder's end, until [`Engine::run`] starts it.
    pub(super) recorder: Mutex<Option<(Recorder, mpsc::UnboundedReceiver<Finished>)>>,
    /// Turns true when the shutdown grace is over: attempts still running stop.
    pub(super) cut_short: watch::Sender<bool>,
    /// The claims of the attempts that stopped, to give back.
    pub(super) abandoned: Mutex<Vec<Delivery>>,
    /// Endpoints' signing keys, opened under [`EngineConfig::keyring`].
    pub(super) opened_keys: OpenedKeys,
    /// The sinks of destinations beyond HTTP, kept between attempts.
    pub(super) sinks: Sinks,
    pub(super) metrics: AttemptMetrics,
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
            sinks: Sinks::new(sender.broker_guard(), clock.clone()),
            metrics: AttemptMetrics::default(),
            lanes: Lanes::new(config.endpoint_max_concurrency, held_budget(workers)),
            workers: Arc::new(Semaphore::new(workers)),
            tickets: Arc::new(Semaphore::new(held_budget(workers))),
            unrecorded: Arc::new(Semaphore::new(unrecorded_budget(workers))),
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
        let handoff = self.store.hand_off_new_deliveries(me);
        tokio::pin!(shutdown);
        // A schedule of its own, not a sleep restarted at every wake-up: finished attempts
        // wake the loop all the time under load, and must not keep the poll from coming.
        let period = self.config.poll_interval.max(Duration::from_millis(1));
        let mut poll = tokio::time::interval(period);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // Shared handoff: when a look again at the queue is due (see `RECHECK`).
        let mut recheck = None;
        loop {
            let claimed_all = self.clone().dispatch_due(handoff).await;
            if claimed_all {
                continue;
            }
            tokio::select! {
                () = &mut shutdown => break,
                () = self.wake.notified() => self.maybe_queued.store(true, Ordering::Release),
                () = self.freed.notified() => {
                    if handoff == HandoffMode::Shared && !self.maybe_queued.load(Ordering::Acquire) {
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
            unrecorded_budget(workers) - self.unrecorded.available_permits(),
        );
    }

    /// Claims due work into the lanes, within their rooms and the deliveries the engine may
    /// hold, and starts what the lanes may start. Returns whether the claim was full, i.e.
    /// more work may be waiting. `handoff`: whether new deliveries come through [`Handoff`],
    /// so that a claim that finds nothing means nothing waits, at least until a wake-up (or,
    /// shared, until attempts finish; see `RECHECK`).
    async fn dispatch_due(self: Arc<Self>, handoff: HandoffMode) -> bool {
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
        // When new deliveries are handed off, a claim leaves them half the tickets: one in
        // flight (on PostgreSQL, milliseconds) would otherwise leave a delivery written
        // meanwhile no room, to wait for a claim of its own. A full claim is followed by the
        // next at once, so a backlog loses nothing.
        let asked = match handoff {
            HandoffMode::None => free,
            HandoffMode::Sole | HandoffMode::Shared => free.div_ceil(2),
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
        if full || (!claimed.is_empty() && handoff == HandoffMode::None) {
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
                    claimed: Box::new(delivery),
                    _ticket: ticket,
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
}

impl EndpointLoad for Engine {
    fn concurrency(&self, endpoint: &EndpointId) -> Option<Concurrency> {
        let (limit, in_flight) = self.lanes.of(endpoint)?;
        Some(Concurrency { limit, in_flight })
    }
}

/// Deliveries an engine of `workers` may hold at once with their messages: claimed ahead,
/// being written by a publish, or in flight. Bounds its memory.
pub(super) fn held_budget(workers: usize) -> usize {
    2 * workers
}

/// Attempts an engine of `workers` may have sent and not yet recorded: in flight, or answered
/// and waiting for their record. Bounds what a crash can send twice.
pub(super) fn unrecorded_budget(workers: usize) -> usize {
    2 * workers
}

/// With a shared handoff (PostgreSQL), how long after a claim that found nothing the engine
/// looks again once attempts finish. What waits then was refused for want of room at its
/// endpoint, perhaps held by another process's attempts, whose records free it without a
/// wake-up here; looking at every finished attempt would cost a claim each, mostly empty
/// once new deliveries are handed off.
const RECHECK: Duration = Duration::from_millis(50);

/// Completes at `deadline`; never without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
