//! One attempt's task: waits for its start, sends the signed request, frees its endpoint's
//! slot and its worker the moment the answer is in, and hands the verdict to the recorder
//! (see [`super::recorder`]).
//!
//! The request and what its outcome means are [`super::attempt`]'s; this is the running of it:
//! its timeout (within a third of the lease), its span and log line, the signal its answer
//! gives the endpoint's adaptive limit, and the closing of an endpoint being disabled.

use std::sync::Arc;
use std::time::Duration;

use hookd_core::model::Delivery;
use hookd_store::ClaimedDelivery;
use http::{HeaderName, HeaderValue};
use tracing::Instrument;

use crate::http::{OutgoingRequest, SendError, SendOutcome};
use crate::pipeline::adaptive::Signal;
use crate::pipeline::attempt::{self, Happened, Verdict};
use crate::pipeline::dispatcher::Engine;
use crate::pipeline::lanes::Start;
use crate::pipeline::recorder::Finished;
use crate::telemetry;

impl Engine {
    pub(super) async fn attempt(self: Arc<Self>, start: Start) {
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
                // Its place among the attempts not yet recorded, kept until its record is
                // written: with the records behind, sending waits for them.
                let place = self.unrecorded.clone().acquire_owned().await;
                let place = place.expect("the places are never closed");
                if self.would_outlive_its_lease(&held.claimed) {
                    return None;
                }
                // Boxed: the request's future is large, and the task's own future is moved
                // and replaced whole as the task runs and finishes.
                let send = self.send(&held.claimed).instrument(attempt_span(&held.claimed));
                Some((Box::pin(send).await, place))
            } => sent,
            Ok(_) = cut_short.wait_for(|stop| *stop) => {
                // Shutting down past the grace: nothing recorded, the claim is given back.
                self.lanes.abandoned(&endpoint);
                self.abandoned.lock().expect("abandoned poisoned").push(held.claimed.delivery);
                return;
            }
        };
        let Some(((verdict, signal), place)) = sent else {
            self.lanes.abandoned(&endpoint);
            drop(worker);
            self.pump(&endpoint);
            self.give_back(held.claimed.delivery).await;
            return;
        };
        // The slot, the worker and the ticket are free the moment the answer is in; the
        // delivery stays leased, and its place taken, until its record is written.
        let mut resume = self
            .lanes
            .answered(&endpoint, started, signal, verdict.slow_down);
        drop(worker);
        drop(held);
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
        self.metrics.settled(verdict.next.status);
        let finished = Finished {
            verdict,
            _place: place,
        };
        if let Err(unsent) = self.finished.send(finished) {
            let attempt = &unsent.0.verdict.attempt;
            tracing::warn!(message_id = %attempt.message_id, endpoint_id = %attempt.endpoint_id, attempt_id = %attempt.id, "the recorder has stopped; the attempt will be made again");
        }
    }

    /// The attempt's timeout: the endpoint's own or the engine's, within a third of the lease.
    pub(super) fn timeout(&self, claimed: &ClaimedDelivery) -> Duration {
        claimed
            .endpoint
            .timeout_secs
            .map_or(self.config.attempt_timeout, |s| {
                Duration::from_secs(u64::from(s))
            })
            .min(self.config.lease / 3)
    }

    /// Makes the attempt; its verdict, and what its answer says of the endpoint's capacity.
    async fn send(&self, claimed: &ClaimedDelivery) -> (Verdict, Signal) {
        let started = self.clock.now();
        let jitter = random_fraction();
        let (schedule, failing_after) = (&self.config.schedule, self.config.failing_after);
        let timeout = self.timeout(claimed);
        let keys = &self.opened_keys;
        match attempt::request(claimed, keys, started, timeout, self.config.svix_headers) {
            Ok(request) => {
                let outcome = match claimed.endpoint.destination.is_http() {
                    true => self.post(request).await,
                    false => self.publish(claimed, request).await,
                };
                let (class, took, signal) = (
                    telemetry::outcome(&outcome),
                    outcome.duration,
                    signal(&outcome),
                );
                let verdict = attempt::judge(
                    claimed,
                    Happened::Sent(outcome),
                    self.clock.now(),
                    schedule,
                    failing_after,
                    jitter,
                );
                self.made(&verdict, class, took);
                (verdict, signal)
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
                self.made(&verdict, telemetry::NOT_SENT, Duration::ZERO);
                (verdict, Signal::None)
            }
        }
    }
}

impl Engine {
    /// POSTs the attempt to an HTTP endpoint, with the trace it belongs to.
    async fn post(&self, mut request: OutgoingRequest) -> SendOutcome {
        let traceparent = self.config.traceparent.as_ref().and_then(|t| (t.0)());
        if let Some(value) = traceparent.and_then(|value| HeaderValue::try_from(value).ok()) {
            request.headers.append(TRACEPARENT, value);
        }
        self.sender.send(request).await
    }

    /// Publishes the attempt to a destination beyond HTTP through its sink.
    async fn publish(&self, claimed: &ClaimedDelivery, request: OutgoingRequest) -> SendOutcome {
        let endpoint = &claimed.endpoint;
        match self.opened_keys.open(&endpoint.id, &endpoint.keys) {
            Ok(keys) => self.sinks.publish(claimed, &keys, request).await,
            Err(error) => {
                let unusable = format!("the endpoint's keys are unusable: {error}");
                SendOutcome::failed(SendError::Request(unusable), Duration::ZERO)
            }
        }
    }
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

/// The W3C trace context header.
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// How long an endpoint being disabled (it answered `410 Gone`) starts nothing, so that no
/// attempt starts between the answer and the write that disables it.
const CLOSING: Duration = Duration::from_secs(10);

/// The span of one attempt (for traces: `--otlp-endpoint`), named by what it is for; [`Engine::made`]
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

impl Engine {
    /// Counts an attempt and leaves its log line (and its span's fields).
    fn made(&self, verdict: &Verdict, outcome: &'static str, took: Duration) {
        self.metrics.attempt(outcome, took);
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
}

/// A random number in `[0, 1)` for jitter.
fn random_fraction() -> f64 {
    rand::RngExt::random(&mut rand::rng())
}
