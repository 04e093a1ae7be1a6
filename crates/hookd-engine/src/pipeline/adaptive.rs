//! Adaptive concurrency: how many attempts one endpoint gets at once, learned from its answers.
//!
//! No fixed number fits every receiver: one 50 ms away needs dozens of attempts in flight to
//! take a few hundred a second, while one that queues its requests only answers later the more
//! it is sent. So each endpoint's limit is found the way TCP finds a window (and Vector's
//! Adaptive Request Concurrency or Netflix's concurrency-limits find theirs): it starts small,
//! doubles each round trip while answers stay fast and successful (slow start), then grows by
//! one a round trip; it is halved at once when the receiver pushes back (a timeout, a refused
//! connection, 429, 502, 503, 504) and cut by a tenth when its latency rises well above its
//! unloaded latency (the receiver is queueing). A cut happens at most once per round trip:
//! attempts started before it report on the old limit, and punishing each would collapse it.
//! The limit never passes the endpoint's ceiling.
//!
//! Everything here is arithmetic on what the caller reports, so it is tested without time.

use std::time::Duration;

/// The limit an endpoint starts with, and returns to after a while without work.
pub const INITIAL_LIMIT: usize = 4;

/// How far an attempt's latency may rise above the endpoint's unloaded latency before the
/// limit is cut: twice it, plus a margin. The margin is what a receiver answering in a
/// millisecond may add without counting as overloaded: on a busy machine its answers (and
/// hookd's reading of them) wait for a CPU for milliseconds, and more attempts in flight
/// still deliver more per second there, while a receiver that really queues its work adds
/// its own latency for each request waiting and crosses the margin within a few.
const TOLERANCE: f64 = 2.0;
const SLACK: Duration = Duration::from_millis(20);
/// The multiplicative cuts: on back pressure, and on latency rising.
const BACK_OFF: f64 = 0.5;
const EASE_OFF: f64 = 0.9;
/// Weight of a new sample in the short-term latency average.
const SHORT_WEIGHT: f64 = 0.2;
/// How fast the unloaded latency estimate moves up towards an answer to a lone attempt (it
/// follows a lower latency at once). Only such answers raise it: they are unloaded by
/// definition, while answers under load would let a receiver that queues raise its own
/// baseline. A receiver that really became slower is cut down to one attempt, re-measured
/// there, and grows again.
const UNLOADED_DRIFT: f64 = 0.1;

/// What one attempt's answer says about the endpoint's capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// An answer that is not a sign of overload (any status but 429, 502, 503, 504).
    Answered(Duration),
    /// The receiver pushed back: no connection, no answer in time, or 429/502/503/504.
    Overloaded,
    /// Nothing to learn (the attempt was not sent).
    None,
}

/// One endpoint's adaptive concurrency limit.
#[derive(Clone, Debug)]
pub struct AdaptiveLimit {
    limit: f64,
    ceiling: usize,
    slow_start: bool,
    /// Latency when the receiver is not loaded: the lowest seen, drifting slowly up.
    baseline: Option<f64>,
    /// Recent latency, a moving average (seconds).
    recent: Option<f64>,
    /// Counts cuts: an attempt started under an older generation cannot cause another.
    generation: u64,
}

impl AdaptiveLimit {
    /// A limit starting at [`INITIAL_LIMIT`] (or the ceiling, if lower), never above `ceiling`.
    pub fn new(ceiling: usize) -> Self {
        let ceiling = ceiling.max(1);
        Self {
            limit: INITIAL_LIMIT.min(ceiling) as f64,
            ceiling,
            slow_start: true,
            baseline: None,
            recent: None,
            generation: 0,
        }
    }

    /// How many attempts may be in flight now.
    pub fn current(&self) -> usize {
        (self.limit as usize).clamp(1, self.ceiling)
    }

    /// The ceiling; a lower one (the endpoint's own setting changed) takes effect at once.
    pub fn set_ceiling(&mut self, ceiling: usize) {
        self.ceiling = ceiling.max(1);
        self.limit = self.limit.min(self.ceiling as f64);
    }

    /// What an attempt starting now carries, to report with its answer.
    pub fn start(&self) -> Started {
        Started {
            generation: self.generation,
        }
    }

    /// Learns from one answer. `in_flight` counts the attempts in flight when it arrived, this
    /// one included: the limit grows only while every slot is taken, i.e. while it is what
    /// holds the endpoint back.
    pub fn learn(&mut self, started: Started, signal: Signal, in_flight: usize) {
        let fresh = started.generation == self.generation;
        match signal {
            Signal::None => {}
            Signal::Overloaded => {
                if fresh {
                    self.cut(BACK_OFF);
                }
            }
            Signal::Answered(latency) => {
                let latency = latency.as_secs_f64();
                let baseline = self.observe(latency, in_flight <= 1);
                // Slow start doubles the limit each round trip: judge each answer as it
                // comes, so it stops at the first sign of queueing rather than a moving
                // average's few answers later.
                let recent = match self.recent {
                    Some(recent) if !self.slow_start => recent,
                    _ => latency,
                };
                if recent > baseline * TOLERANCE + SLACK.as_secs_f64() {
                    if fresh {
                        self.cut(EASE_OFF);
                    }
                } else if in_flight >= self.current() {
                    self.grow();
                }
            }
        }
    }

    fn observe(&mut self, latency: f64, unloaded: bool) -> f64 {
        let baseline = match self.baseline {
            Some(b) if latency < b => latency,
            Some(b) if unloaded => b + (latency - b) * UNLOADED_DRIFT,
            Some(b) => b,
            None => latency,
        };
        self.baseline = Some(baseline);
        self.recent = Some(match self.recent {
            Some(r) => r + (latency - r) * SHORT_WEIGHT,
            None => latency,
        });
        baseline
    }

    fn grow(&mut self) {
        let step = if self.slow_start {
            1.0
        } else {
            1.0 / self.limit
        };
        self.limit = (self.limit + step).min(self.ceiling as f64);
    }

    fn cut(&mut self, factor: f64) {
        self.limit = (self.limit * factor).max(1.0);
        self.slow_start = false;
        self.generation += 1;
        // The latency seen so far was under the old limit: judge the new one afresh.
        self.recent = None;
    }
}

/// Carried by an attempt from its start to its answer (see [`AdaptiveLimit::learn`]).
#[derive(Clone, Copy, Debug)]
pub struct Started {
    generation: u64,
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Feeds `answers` answers to a pipeline that keeps every slot of the limit busy (each
    /// answer frees a slot, refilled at once), each answer being `signal(in_flight)`.
    fn drive(limit: &mut AdaptiveLimit, answers: usize, signal: impl Fn(usize) -> Signal) {
        let mut in_flight: VecDeque<Started> = VecDeque::new();
        for _ in 0..answers {
            while in_flight.len() < limit.current() {
                in_flight.push_back(limit.start());
            }
            let n = in_flight.len();
            let started = in_flight.pop_front().expect("refilled");
            limit.learn(started, signal(n), n);
        }
    }

    #[test]
    fn a_receiver_with_constant_latency_is_driven_to_the_ceiling() {
        let mut limit = AdaptiveLimit::new(64);
        assert_eq!(limit.current(), INITIAL_LIMIT);
        drive(&mut limit, 4 + 8 + 16 + 32, |_| Signal::Answered(50 * MS));
        assert_eq!(limit.current(), 64, "slow start doubles each round trip");
    }

    #[test]
    fn a_receiver_whose_latency_grows_with_its_load_holds_the_limit_low() {
        let mut limit = AdaptiveLimit::new(512);
        // Each request in flight adds 10 ms: a receiver working through a queue.
        drive(&mut limit, 5_000, |n| Signal::Answered(10 * MS * n as u32));
        assert!(
            limit.current() <= 12,
            "latency tolerated only to about twice the unloaded: {}",
            limit.current()
        );
    }

    #[test]
    fn back_pressure_halves_the_limit_once_per_round_trip() {
        let mut limit = AdaptiveLimit::new(64);
        drive(&mut limit, 200, |_| Signal::Answered(MS));
        assert_eq!(limit.current(), 64);
        // A whole round trip of 503s: one cut, not one per answer.
        drive(&mut limit, 64, |_| Signal::Overloaded);
        assert_eq!(limit.current(), 32);
        drive(&mut limit, 32, |_| Signal::Overloaded);
        assert_eq!(limit.current(), 16);
        drive(&mut limit, 100, |_| Signal::Overloaded);
        assert_eq!(limit.current(), 1, "never below one");
    }

    #[test]
    fn after_a_cut_the_limit_grows_by_about_one_a_round_trip() {
        let mut limit = AdaptiveLimit::new(64);
        drive(&mut limit, 30, |_| Signal::Answered(MS));
        drive(&mut limit, 1, |_| Signal::Overloaded);
        let after_cut = limit.current();
        // Round trips of the answers started under the old limit first, then five more.
        drive(&mut limit, 5 * (after_cut + 3) + 2 * after_cut, |_| {
            Signal::Answered(MS)
        });
        let grown = limit.current() - after_cut;
        assert!((5..=8).contains(&grown), "grew by {grown}");
    }

    #[test]
    fn an_idle_endpoint_does_not_grow_its_limit() {
        let mut limit = AdaptiveLimit::new(64);
        for _ in 0..100 {
            let s = limit.start();
            limit.learn(s, Signal::Answered(MS), 1);
        }
        assert_eq!(
            limit.current(),
            INITIAL_LIMIT,
            "one at a time never needs more"
        );
    }

    #[test]
    fn a_receiver_that_became_slower_is_not_held_at_one() {
        let mut limit = AdaptiveLimit::new(64);
        drive(&mut limit, 100, |_| Signal::Answered(MS));
        // It moved far away: every answer now takes 80 ms, however many are in flight.
        drive(&mut limit, 4_000, |_| Signal::Answered(80 * MS));
        assert_eq!(limit.current(), 64);
    }

    #[test]
    fn a_lower_ceiling_applies_at_once() {
        let mut limit = AdaptiveLimit::new(64);
        drive(&mut limit, 200, |_| Signal::Answered(MS));
        limit.set_ceiling(8);
        assert_eq!(limit.current(), 8);
        assert_eq!(
            AdaptiveLimit::new(2).current(),
            2,
            "starts within its ceiling"
        );
    }
}
