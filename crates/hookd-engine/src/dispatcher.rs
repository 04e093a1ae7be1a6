//! The engine's loop: claim due deliveries, run each attempt under the limits, record it.
//!
//! One task claims; each claimed delivery gets a task of its own that waits for its endpoint's
//! in-flight slot and rate limit, sends, and hands its verdict to the recorder (see
//! [`crate::recorder`]), which writes finished attempts in batches. The loop claims again as soon as it is
//! woken: by the API ("new messages"), by a finished attempt (capacity freed), or by the poll
//! interval (retries coming due). Claims are leases, so a process that dies mid-attempt loses
//! nothing: its deliveries become due again when their lease ends.
//!
//! New deliveries need no claim: the engine takes them as they are written (see
//! [`hookd_store::Handoff`]), already claimed, whenever a worker and the endpoint have room, and
//! starts them once committed; one it has no worker for wakes it, to be claimed once a worker
//! is free. Claims then find only what it had no room for, retries and
//! recovered deliveries, so the engine claims only when work may be waiting: after a wake-up
//! (work queued), a poll, or a claim that found some. On PostgreSQL, where several processes
//! share the queue, a delivery may also wait for room another process's attempts hold, freed
//! by their records without a wake-up here; so once a claim finds nothing, finished attempts
//! make the engine look again a little later (`RECHECK`), not at each one.
//!
//! Shutting down, the engine stops claiming and gives the attempts in flight a grace period
//! to finish and be recorded; the claims of those still running at its end are given back
//! (due at once), so another process need not wait out their leases.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use hookd_core::model::Delivery;
use hookd_core::{Clock, EndpointId};
use hookd_store::{ClaimRequest, ClaimedDelivery, Handoff, Handover, Reserved, Store};
use hookd_vault::{Keyring, OpenedKeys};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::time::MissedTickBehavior;

use crate::attempt::{self, Happened, Verdict};
use crate::http::WebhookSender;
use crate::limits::{Claim, EndpointLimits};
use crate::operations::Operations;
use crate::recorder::{Finished, Recorder};
use crate::schedule::RetrySchedule;
use crate::telemetry;

/// How the engine behaves.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Attempts in flight across all endpoints.
    pub workers: usize,
    /// Attempts in flight to any one endpoint.
    pub per_endpoint_concurrency: usize,
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
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            workers: 64,
            per_endpoint_concurrency: 4,
            attempt_timeout: Duration::from_secs(15),
            lease: Duration::from_secs(90),
            poll_interval: Duration::from_secs(1),
            schedule: RetrySchedule::default(),
            disable_after: Duration::from_secs(5 * 24 * 3600),
            failing_after: 4,
            svix_headers: false,
            keyring: Arc::new(Keyring::ephemeral()),
            shutdown_grace: Duration::from_secs(10),
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
    /// Workers were freed (attempts recorded).
    freed: Arc<Notify>,
    /// Whether the database may hold due deliveries no claim has found yet. Starts true.
    maybe_queued: AtomicBool,
    /// Turns true when the engine stops claiming: new deliveries are no longer taken either.
    stopping: AtomicBool,
    /// The engine itself, for the attempts of the deliveries it takes as they are written.
    me: Weak<Self>,
    limits: Arc<EndpointLimits>,
    workers: Arc<Semaphore>,
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
            limits: EndpointLimits::new(config.per_endpoint_concurrency),
            workers: Arc::new(Semaphore::new(config.workers.max(1))),
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
                }
            }
        }
        self.stopping.store(true, Ordering::Release);
        self.drain().await;
    }

    /// Waits (up to the grace) until every worker is free, i.e. every attempt is recorded;
    /// then stops the attempts still running and releases their claims.
    async fn drain(&self) {
        let workers = u32::try_from(self.config.workers.max(1)).unwrap_or(u32::MAX);
        let busy = workers as usize - self.workers.available_permits();
        if busy > 0 {
            tracing::info!(attempts = busy, grace = ?self.config.shutdown_grace, "stopped claiming; waiting for the attempts in flight");
        }
        let all_done = tokio::time::timeout(
            self.config.shutdown_grace,
            self.workers.acquire_many(workers),
        )
        .await;
        if all_done.is_ok() {
            return;
        }
        self.cut_short.send_replace(true);
        // Stopped attempts free their workers at once; finished ones once recorded.
        let _all = self.workers.acquire_many(workers).await;
        let abandoned = std::mem::take(&mut *self.abandoned.lock().expect("abandoned poisoned"));
        match self
            .store
            .release_claims(&abandoned, self.clock.now())
            .await
        {
            Ok(released) => tracing::info!(
                stopped = abandoned.len(),
                released,
                "attempts still running after the shutdown grace were stopped; their deliveries are due again"
            ),
            Err(error) => {
                tracing::warn!(%error, stopped = abandoned.len(), "cannot give back the claims of stopped attempts; they are due again when their leases end")
            }
        }
    }

    /// Claims as much due work as there are free workers (half of them, when new deliveries
    /// are handed over) and starts it. Returns whether the claim was full, i.e. more work may
    /// be waiting. `handover`: whether new deliveries come through [`Handoff`], so that a
    /// claim that finds nothing means nothing waits, at least until a wake-up (or, shared,
    /// until attempts finish; see `RECHECK`).
    async fn dispatch_due(self: Arc<Self>, handover: Handover) -> bool {
        if !self.maybe_queued.load(Ordering::Acquire) {
            return false;
        }
        let free = self.workers.available_permits();
        // Every finished attempt wakes the loop. When nearly all workers are busy, claiming for
        // each one as it frees would cost a database write per delivery; waiting until a
        // sixteenth of them are free claims in batches, and only under saturation, where the
        // wait is short beside the queue anyway.
        if free < (self.config.workers / 16).max(1) {
            return false;
        }
        // Held before claiming: new deliveries taken meanwhile use workers too. When they are
        // handed over, a claim leaves them half: one in flight (on PostgreSQL, milliseconds)
        // would otherwise leave a delivery written meanwhile no worker, to wait for a claim of
        // its own. A full claim is followed by the next at once, so a backlog loses nothing.
        let asked = match handover {
            Handover::None => free,
            Handover::Sole | Handover::Shared => free.div_ceil(2),
        };
        let Ok(mut workers) = self.workers.clone().try_acquire_many_owned(asked as u32) else {
            return false;
        };
        let now = self.clock.now();
        let request = ClaimRequest {
            now,
            lease_until: now.plus(self.config.lease),
            limit: asked,
            per_endpoint: self.config.per_endpoint_concurrency,
            skip_endpoints: self.limits.full(),
        };
        let started = Instant::now();
        let claimed = match self.store.claim_due(&request).await {
            Ok(claimed) => {
                telemetry::store_write("claim", claimed.len(), started.elapsed());
                claimed
            }
            Err(error) => {
                tracing::warn!(%error, "cannot claim deliveries; retrying after the poll interval");
                return false;
            }
        };
        let full = claimed.len() == asked;
        let found = !claimed.is_empty() || !request.skip_endpoints.is_empty();
        self.maybe_queued
            .store(found || handover == Handover::None, Ordering::Release);
        for delivery in claimed {
            let worker = workers.split(1).expect("claims never exceed free workers");
            let claim = self.limits.claim(&delivery.endpoint.id);
            tokio::spawn(self.clone().attempt(delivery, claim, worker));
        }
        full
    }

    async fn attempt(
        self: Arc<Self>,
        claimed: ClaimedDelivery,
        claim: Claim,
        worker: OwnedSemaphorePermit,
    ) {
        let mut cut_short = self.cut_short.subscribe();
        let verdict = tokio::select! {
            verdict = async {
                let slot = claim.ready(claimed.endpoint.throttle_rate).await;
                if self.would_outlive_its_lease(&claimed) {
                    return None;
                }
                let verdict = self.send(&claimed).await;
                drop(slot);
                Some(verdict)
            } => verdict,
            Ok(_) = cut_short.wait_for(|stop| *stop) => {
                // Shutting down past the grace: nothing recorded, the claim is given back.
                self.abandoned.lock().expect("abandoned poisoned").push(claimed.delivery);
                return;
            }
        };
        let Some(verdict) = verdict else {
            self.give_back(claimed.delivery).await;
            return;
        };
        // This process holds the endpoint at once; the others, once the record is written.
        if let Some(pause) = verdict.slow_down {
            self.limits.hold(&claimed.endpoint.id, pause);
        }
        // The endpoint is free for its next delivery while this one is recorded (its row stays
        // leased until then); the worker goes with the verdict to the recorder.
        drop(claim);
        telemetry::settled(verdict.next.status);
        let finished = Finished {
            verdict,
            _worker: worker,
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
    /// waits for its endpoint's slot and rate limit after its claim, and may wait that long
    /// (a low `rateLimit` under a high `--endpoint-concurrency`). Once the lease is over,
    /// another claim may take the delivery, and its message would be in flight twice.
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

    async fn send(&self, claimed: &ClaimedDelivery) -> Verdict {
        let started = self.clock.now();
        let jitter = random_fraction();
        let (schedule, failing_after) = (&self.config.schedule, self.config.failing_after);
        let timeout = self.timeout(claimed);
        let keys = &self.opened_keys;
        match attempt::request(claimed, keys, started, timeout, self.config.svix_headers) {
            Ok(request) => {
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
                verdict
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
                verdict
            }
        }
    }
}

impl Handoff for Engine {
    /// Takes a new delivery when a worker is free and its endpoint below its concurrency, so
    /// its attempt starts at once.
    fn reserve(&self, endpoint: &EndpointId) -> Option<Reserved> {
        if self.stopping.load(Ordering::Acquire) {
            return None;
        }
        let engine = self.me.upgrade()?;
        let Ok(worker) = self.workers.clone().try_acquire_owned() else {
            // Queued instead. A claim in flight holds every free worker and may have read
            // before this delivery was written: claim again once it is done, rather than
            // count on the writer's wake-up.
            self.wake.notify_one();
            return None;
        };
        let claim = self.limits.try_claim(endpoint)?;
        let lease_until = self.clock.now().plus(self.config.lease);
        Some(Reserved::new(lease_until, move |claimed| {
            tokio::spawn(engine.attempt(claimed, claim, worker));
        }))
    }

    fn per_endpoint(&self) -> usize {
        self.config.per_endpoint_concurrency
    }
}

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

/// Counts an attempt and leaves its log line.
fn made(verdict: &Verdict, outcome: &'static str, took: Duration) {
    telemetry::attempt(outcome, took);
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
