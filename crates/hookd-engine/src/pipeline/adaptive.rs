//! Adaptive concurrency: how many attempts one endpoint gets at once, learned from its answers.
//!
//! No fixed number fits every receiver: one 50 ms away needs dozens of attempts in flight to
//! take a few hundred a second, while one that queues its requests only answers later the more
//! it is sent. So each endpoint's limit is found the way TCP finds a window (and Vector's
//! Adaptive Request Concurrency or Netflix's concurrency-limits find theirs): it starts small,
//! doubles each round trip while answers stay fast and successful (slow start), then grows by
//! one a round trip; it is halved at once when the receiver pushes back (a timeout, a refused
//! connection, 429, 502, 503, 504), cut by a tenth when its latency rises well above its
//! unloaded latency, and cut to what it needs when its answers per second do not rise with
//! the requests in flight (more in flight buys nothing). A cut happens at most once per round
//! trip: attempts started before it report on the old limit, and punishing each would
//! collapse it. The limit never passes the endpoint's ceiling.
//!
//! The answers per second come from Little's law, without a clock: an attempt that reached
//! the receiver with `n` in flight and took `t` was one of `n` answers every `t`. They are
//! kept for each level of in-flight counts (1, 2, 3, then octaves: 4–7, 8–15, …), and a level
//! that answers hardly faster than a lower one measured lately is only a queue: a receiver
//! whose latency grows with its requests in flight gives as many answers at 2 as at 10. When
//! that queue costs at least the latency margin below ([`SLACK`]), the limit is cut to half
//! of what the rate needs in flight without a queue (the rate times the unloaded latency), at
//! least 2 and at most by half at once. Latency alone cannot tell such a receiver from a fast
//! one on a busy machine, whose latency rises too (waiting for a CPU) while more in flight
//! still delivers more.
//!
//! Everything here is arithmetic on what the caller reports, so it is tested without time.

use std::time::Duration;

/// The limit an endpoint starts with, and returns to after a while without work.
pub const INITIAL_LIMIT: usize = 4;

/// How far an attempt's latency may rise above the endpoint's unloaded latency before the
/// limit is cut: twice it, plus a margin. The margin is what a receiver answering in a
/// millisecond may add without counting as overloaded: on a busy machine its answers (and
/// hookd's reading of them) wait for a CPU for milliseconds, and more attempts in flight
/// still deliver more per second there. A receiver that queues its work within the margin
/// is found by its answers per second instead (see [`Levels`]).
const TOLERANCE: f64 = 2.0;
const SLACK: Duration = Duration::from_millis(20);
/// The multiplicative cuts: on back pressure, and on latency rising (and the least cut).
const BACK_OFF: f64 = 0.5;
const EASE_OFF: f64 = 0.9;
/// The least a queueing receiver is cut to: two in flight keep a receiver that works one
/// request at a time busy while hookd reads an answer and sends the next.
const QUEUE_FLOOR: f64 = 2.0;
/// The share of a queueing receiver's needs (see [`AdaptiveLimit::learn`]) it is cut to.
const PROBE: f64 = 0.5;
/// A queue is cut only when it costs at least this much latency: the margin a receiver's
/// latency may rise by in any case (see [`SLACK`]). Below it, a fast receiver on a busy
/// machine waits for a CPU, its rate flat while the machine is saturated, yet a window cut
/// there sends hookd's own publishes the long way, through the database, and delivers less.
const QUEUE_WORTH: Duration = SLACK;
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
    /// Answers per second at each level of in-flight counts.
    levels: Levels,
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
            levels: Levels::default(),
            generation: 0,
        }
    }

    /// How many attempts may be in flight now.
    pub fn current(&self) -> usize {
        (self.limit as usize).clamp(1, self.ceiling)
    }

    /// The endpoint's unloaded round trip (the lowest latency seen, drifting up slowly), if it
    /// has answered yet: steadier than its recent latency, which a busy moment moves at once.
    pub fn unloaded_round_trip(&self) -> Option<Duration> {
        self.baseline.map(Duration::from_secs_f64)
    }

    /// The ceiling; a lower one (the endpoint's own setting changed) takes effect at once.
    pub fn set_ceiling(&mut self, ceiling: usize) {
        self.ceiling = ceiling.max(1);
        self.limit = self.limit.min(self.ceiling as f64);
    }

    /// What an attempt starting now carries, to report with its answer; `in_flight` counts
    /// the endpoint's attempts in flight once it and those started with it are on their way
    /// (what the receiver has in progress when they arrive).
    pub fn start(&self, in_flight: usize) -> Started {
        Started {
            generation: self.generation,
            in_flight: in_flight.max(1),
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
                    self.cut_to(self.limit * BACK_OFF);
                }
            }
            Signal::Answered(latency) => {
                let latency = latency.as_secs_f64();
                let baseline = self.observe(latency, in_flight <= 1);
                let queue = self
                    .levels
                    .queueing(started, latency, self.current(), baseline);
                // Slow start doubles the limit each round trip: judge each answer as it
                // comes, so it stops at the first sign of queueing rather than a moving
                // average's few answers later.
                let recent = match self.recent {
                    Some(recent) if !self.slow_start => recent,
                    _ => latency,
                };
                if let Some(rate) = queue {
                    if fresh {
                        // What that rate needs in flight without a queue (Little's law again),
                        // halved: the unloaded latency is the lowest seen, at the fewest in
                        // flight seen, and the rate was flat down to there, so it may be
                        // queueing too; but at most half the limit at once, as for back
                        // pressure.
                        let needed = (rate * baseline * PROBE)
                            .max(QUEUE_FLOOR)
                            .max(self.limit * BACK_OFF);
                        self.cut_to(needed);
                    }
                } else if recent > baseline * TOLERANCE + SLACK.as_secs_f64() {
                    if fresh {
                        self.cut_to(self.limit * EASE_OFF);
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

    /// Cuts the limit to `target`, or by [`EASE_OFF`] when that is not lower.
    fn cut_to(&mut self, target: f64) {
        let target = if target < self.limit {
            target
        } else {
            self.limit * EASE_OFF
        };
        self.limit = target.max(1.0);
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
    in_flight: usize,
}

/// Levels of in-flight counts: 1, 2, 3, 4–7, 8–15, … (the last holds everything above).
const LEVELS: usize = 17;
/// Weight of a new answer in its level's averages.
const LEVEL_WEIGHT: f64 = 0.2;
/// A level's figures count while it was answered within this many round trips (answers
/// per limit), so the limit is judged against what the receiver does now.
const FRESH_ROUND_TRIPS: u64 = 16;
/// Two levels are compared only when their average in-flight counts differ by this much:
/// closer, the noise of their latencies outweighs what the difference in load did.
const SPREAD: f64 = 1.25;
/// How much of a rise in requests in flight must show in answers per second: more in flight
/// by a factor `k` must answer at least `k^GAIN` times as fast. A constant latency answers
/// `k` times as fast (an exponent of 1); latency rising in proportion, as fast (0).
const GAIN: f64 = 0.3;

/// Answers per second at each level of in-flight counts.
#[derive(Clone, Debug, Default)]
struct Levels {
    levels: [Option<Level>; LEVELS],
    /// Answers seen, the clock freshness is counted in.
    answers: u64,
}

/// Moving averages of the in-flight counts attempts started with and of their latencies.
#[derive(Clone, Copy, Debug)]
struct Level {
    in_flight: f64,
    latency: f64,
    /// [`Levels::answers`] at its latest answer.
    seen: u64,
}

impl Level {
    /// Answers per second, by Little's law.
    fn rate(&self) -> f64 {
        self.in_flight / self.latency.max(f64::MIN_POSITIVE)
    }
}

impl Levels {
    /// Records the answer to an attempt `started` that took `latency` seconds. When its
    /// level answers hardly faster than a lower one seen in the last few round trips of
    /// `limit` (the requests beyond that one's only queue) and its latency is at least
    /// [`QUEUE_WORTH`] above `unloaded`, returns its answers per second.
    fn queueing(
        &mut self,
        started: Started,
        latency: f64,
        limit: usize,
        unloaded: f64,
    ) -> Option<f64> {
        self.answers += 1;
        if self.answers == 1 {
            // The first answer waited for a connection to be opened (and more), whatever
            // the receiver's load.
            return None;
        }
        let index = match started.in_flight {
            // Below four, one in flight more is already a large step: each count is its own.
            n @ 1..4 => n - 1,
            n => (n.ilog2() as usize + 1).min(LEVELS - 1),
        };
        let in_flight = started.in_flight as f64;
        let level = match self.levels[index] {
            Some(o) => Level {
                in_flight: o.in_flight + (in_flight - o.in_flight) * LEVEL_WEIGHT,
                latency: o.latency + (latency - o.latency) * LEVEL_WEIGHT,
                seen: self.answers,
            },
            None => Level {
                in_flight,
                latency,
                seen: self.answers,
            },
        };
        self.levels[index] = Some(level);
        let lately = self
            .answers
            .saturating_sub(FRESH_ROUND_TRIPS * limit as u64);
        let lower = self.levels[..index]
            .iter()
            .rev()
            .flatten()
            .filter(|lower| lower.seen >= lately)
            .find(|lower| level.in_flight >= lower.in_flight * SPREAD)?;
        let more = level.in_flight / lower.in_flight;
        let flat = level.rate() < lower.rate() * more.powf(GAIN);
        let costly = level.latency - unloaded >= QUEUE_WORTH.as_secs_f64();
        (flat && costly).then(|| level.rate())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Feeds `answers` answers to a pipeline that keeps every slot of the limit busy (each
    /// answer frees a slot, refilled at once), each answer being `signal(n)` for the `n` in
    /// flight once its attempt and those started with it were sent (what the receiver had in
    /// progress when they arrived).
    /// Returns those counts, in the order the attempts were answered.
    fn drive(
        limit: &mut AdaptiveLimit,
        answers: usize,
        mut signal: impl FnMut(usize) -> Signal,
    ) -> Vec<usize> {
        let mut in_flight: VecDeque<(Started, usize)> = VecDeque::new();
        let mut arrivals = Vec::with_capacity(answers);
        // The first are handed over one at a time, as a backlog of publishes is.
        while in_flight.len() < limit.current() {
            let n = in_flight.len() + 1;
            in_flight.push_back((limit.start(n), n));
        }
        for _ in 0..answers {
            // Started together, they arrive together: each to all of them in progress.
            let (before, n) = (in_flight.len(), limit.current().max(in_flight.len()));
            let started = limit.start(n);
            in_flight.extend((before..n).map(|_| (started, n)));
            let n = in_flight.len();
            let (started, arrived_to) = in_flight.pop_front().expect("refilled");
            arrivals.push(arrived_to);
            limit.learn(started, signal(arrived_to), n);
        }
        arrivals
    }

    /// The count nine in ten of `counts` are at or below.
    fn p90(counts: &[usize]) -> usize {
        let mut sorted = counts.to_vec();
        sorted.sort_unstable();
        sorted[(sorted.len() * 9).div_ceil(10) - 1]
    }

    /// Answers per second of a window kept full of attempts started with `arrivals` in
    /// flight, each taking `latency(n)` (Little's law: `n` answers every `latency(n)`).
    fn rate(arrivals: &[usize], latency: impl Fn(usize) -> Duration) -> f64 {
        let seconds: f64 = arrivals
            .iter()
            .map(|&n| latency(n).as_secs_f64() / n as f64)
            .sum();
        arrivals.len() as f64 / seconds
    }

    /// Pseudo-random milliseconds below `below`, the same every run.
    fn noise(below: u64) -> impl FnMut() -> Duration {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            Duration::from_micros(state % (below * 1_000))
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
    fn a_distant_receiver_keeps_its_rate() {
        // 200 ms away, give or take 10 ms: only many in flight take many a second.
        let mut limit = AdaptiveLimit::new(512);
        let mut jitter = noise(10);
        let arrivals = drive(&mut limit, 20_000, |_| {
            Signal::Answered(195 * MS + jitter())
        });
        assert_eq!(
            limit.current(),
            512,
            "{:?}",
            &arrivals[arrivals.len() - 10..]
        );
    }

    #[test]
    fn a_receiver_whose_latency_grows_with_its_load_is_held_low() {
        let mut limit = AdaptiveLimit::new(512);
        // Each request in progress adds 10 ms: a receiver working through a queue, as fast
        // at two in flight as at ten, only later.
        let latency = |n: usize| MS + 10 * MS * n as u32;
        let arrivals = drive(&mut limit, 5_000, |n| Signal::Answered(latency(n)));
        let held = p90(&arrivals);
        assert!(held <= 4, "{held} in flight for one request in ten");
        assert!(limit.current() <= 4, "settled at {}", limit.current());
        let (kept, at_ten) = (rate(&arrivals, latency), rate(&[10], latency));
        assert!(kept >= 0.9 * at_ten, "{kept:.0}/s against {at_ten:.0}/s");
    }

    #[test]
    fn a_fast_receiver_on_a_busy_machine_is_not_collapsed() {
        let mut limit = AdaptiveLimit::new(64);
        // A millisecond away, answers waiting up to 15 ms more for a CPU however many are in
        // flight, and a little more the more there are.
        let mut busy = noise(15);
        let arrivals = drive(&mut limit, 50_000, |n| {
            Signal::Answered(MS + busy() + Duration::from_micros(20 * n as u64))
        });
        let last = &arrivals[arrivals.len() - 10_000..];
        assert!(p90(last) >= 48, "{:?}", &last[last.len() - 20..]);
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
            let s = limit.start(1);
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
