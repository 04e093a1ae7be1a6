//! The retry schedule: when the next attempt of a failed delivery is due.
//!
//! The default is the Standard Webhooks example: immediately, then 5 s, 5 min, 30 min, 2 h,
//! 5 h, 10 h, 14 h, 20 h and 24 h — ten attempts spanning about three days. Every wait is
//! spread at random (by default up to +10 %, see [`Jitter`]) so that a receiver coming back from
//! an outage is not hit by every retry at once, and a receiver's `Retry-After` wins when it
//! asks for longer (up to a cap).

use std::time::{Duration, SystemTime};

use hookd_core::{DurationParseError, Timestamp, parse_duration};

/// When attempts are made, counted from the previous attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct RetrySchedule {
    /// `delays[0]` is the wait before the first attempt (normally zero), `delays[n]` the wait
    /// after the `n`-th attempt failed. Its length is the number of attempts.
    delays: Vec<Duration>,
    /// The longest `Retry-After` honoured.
    max_retry_after: Duration,
    jitter: Jitter,
}

/// How far each wait is spread at random, as fractions of it: from `-below` to `+above`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Jitter {
    below: f64,
    above: f64,
}

impl Default for Jitter {
    /// Up to +10 %: a retry never comes earlier than its schedule says.
    fn default() -> Self {
        Self {
            below: 0.0,
            above: 0.1,
        }
    }
}

impl Jitter {
    /// The widest spread accepted either way.
    const MAX_PERCENT: f64 = 50.0;

    /// `+10%` spreads waits up to 10 % longer; `±20%` (or `+-20%`) up to 20 % shorter or
    /// longer; `0` not at all.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        let bad = || ScheduleError::BadJitter(text.to_owned());
        let trimmed = text.trim();
        let (both_ways, number) = if let Some(rest) = trimmed
            .strip_prefix('±')
            .or_else(|| trimmed.strip_prefix("+-"))
        {
            (true, rest)
        } else {
            (false, trimmed.strip_prefix('+').unwrap_or(trimmed))
        };
        let percent: f64 = number
            .strip_suffix('%')
            .unwrap_or(number)
            .trim()
            .parse()
            .map_err(|_| bad())?;
        if !(0.0..=Self::MAX_PERCENT).contains(&percent) {
            return Err(bad());
        }
        let fraction = percent / 100.0;
        Ok(Self {
            below: if both_ways { fraction } else { 0.0 },
            above: fraction,
        })
    }

    /// The factor a wait is multiplied by, for `random` in `[0, 1)`.
    fn factor(self, random: f64) -> f64 {
        1.0 - self.below + (self.below + self.above) * random.clamp(0.0, 1.0)
    }
}

/// A schedule that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    #[error("the retry schedule needs at least one attempt")]
    Empty,
    #[error(transparent)]
    BadDuration(#[from] DurationParseError),
    #[error("{0:?} is not a jitter (use e.g. +10% or ±20%, at most 50%)")]
    BadJitter(String),
}

impl Default for RetrySchedule {
    fn default() -> Self {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        let hours = |h: u64| minutes(h * 60);
        Self {
            delays: vec![
                Duration::ZERO,
                Duration::from_secs(5),
                minutes(5),
                minutes(30),
                hours(2),
                hours(5),
                hours(10),
                hours(14),
                hours(20),
                hours(24),
            ],
            max_retry_after: hours(24),
            jitter: Jitter::default(),
        }
    }
}

impl RetrySchedule {
    /// A schedule from a comma-separated list such as `0,5s,5m,30m,2h`.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        let delays = text
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(parse_duration)
            .collect::<Result<Vec<_>, _>>()?;
        if delays.is_empty() {
            return Err(ScheduleError::Empty);
        }
        Ok(Self {
            delays,
            ..Self::default()
        })
    }

    /// The same schedule with waits spread by `jitter`.
    pub fn with_jitter(self, jitter: Jitter) -> Self {
        Self { jitter, ..self }
    }

    /// How many attempts a delivery gets.
    pub fn attempts(&self) -> u32 {
        self.delays.len() as u32
    }

    /// The wait after the `attempts_made`-th attempt failed, or `None` when that was the last.
    /// `jitter` in `[0, 1)` picks where in the schedule's [`Jitter`] the wait falls;
    /// `retry_after` (the receiver's request) replaces the wait when longer, up to the cap.
    pub fn next_delay(
        &self,
        attempts_made: u32,
        jitter: f64,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        let scheduled = *self.delays.get(attempts_made as usize)?;
        let jittered = scheduled.mul_f64(self.jitter.factor(jitter));
        let asked = retry_after
            .map(|d| d.min(self.max_retry_after))
            .unwrap_or_default();
        Some(jittered.max(asked))
    }
}

/// A duration in words, in the largest unit that measures it whole: `5 days`, `12 hours`.
pub fn describe_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    let (count, unit) = [(86_400, "day"), (3_600, "hour"), (60, "minute")]
        .into_iter()
        .find(|(size, _)| seconds >= *size && seconds.is_multiple_of(*size))
        .map_or((seconds, "second"), |(size, unit)| (seconds / size, unit));
    let plural = if count == 1 { "" } else { "s" };
    format!("{count} {unit}{plural}")
}

/// A `Retry-After` value (delay seconds or an HTTP date) as a wait from `now`.
pub fn parse_retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let now = SystemTime::UNIX_EPOCH + Duration::from_millis(now.as_millis().max(0) as u64);
    Some(at.duration_since(now).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_described_in_their_largest_whole_unit() {
        let words = |secs| describe_duration(Duration::from_secs(secs));
        assert_eq!(words(5 * 86_400), "5 days");
        assert_eq!(words(86_400), "1 day");
        assert_eq!(words(12 * 3_600), "12 hours");
        assert_eq!(words(90 * 60), "90 minutes");
        assert_eq!(words(61), "61 seconds");
        assert_eq!(words(0), "0 seconds");
    }

    #[test]
    fn default_schedule_is_ten_attempts_over_about_three_days() {
        let schedule = RetrySchedule::default();
        assert_eq!(schedule.attempts(), 10);
        let total: Duration = (1..10)
            .map(|n| schedule.next_delay(n, 0.0, None).unwrap())
            .sum();
        assert_eq!(total, Duration::from_secs(75 * 3600 + 35 * 60 + 5));
        assert_eq!(schedule.next_delay(10, 0.0, None), None);
    }

    #[test]
    fn jitter_stretches_by_at_most_ten_percent() {
        let schedule = RetrySchedule::default();
        assert_eq!(
            schedule.next_delay(2, 0.0, None),
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            schedule.next_delay(2, 0.999_999, None).unwrap().as_secs(),
            329
        );
        assert_eq!(
            schedule.next_delay(1, 0.5, None),
            Some(Duration::from_millis(5_250))
        );
    }

    #[test]
    fn a_jitter_both_ways_spreads_waits_shorter_and_longer() {
        let schedule = RetrySchedule::default().with_jitter(Jitter::parse("±20%").unwrap());
        assert_eq!(
            schedule.next_delay(2, 0.0, None),
            Some(Duration::from_secs(240))
        );
        assert_eq!(
            schedule.next_delay(2, 0.5, None),
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            schedule.next_delay(2, 0.999_999, None).unwrap().as_secs(),
            359
        );
        let none = RetrySchedule::default().with_jitter(Jitter::parse("0").unwrap());
        assert_eq!(
            none.next_delay(2, 0.9, None),
            Some(Duration::from_secs(300))
        );
    }

    #[test]
    fn jitters_parse_from_text_and_are_bounded() {
        assert_eq!(Jitter::parse("+10%").unwrap(), Jitter::default());
        assert_eq!(Jitter::parse("+-20%"), Jitter::parse("±20%"));
        for bad in ["", "ten", "+60%", "-5%", "±"] {
            assert_eq!(
                Jitter::parse(bad),
                Err(ScheduleError::BadJitter(bad.to_owned())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn retry_after_wins_when_longer_and_is_capped() {
        let schedule = RetrySchedule::default();
        let asked = Some(Duration::from_secs(120));
        assert_eq!(
            schedule.next_delay(1, 0.0, asked),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            schedule.next_delay(3, 0.0, asked),
            Some(Duration::from_secs(1_800))
        );
        let absurd = Some(Duration::from_secs(30 * 86_400));
        assert_eq!(
            schedule.next_delay(1, 0.0, absurd),
            Some(Duration::from_secs(86_400))
        );
    }

    #[test]
    fn schedules_parse_from_text() {
        let schedule = RetrySchedule::parse("0, 5s, 5m, 2h, 1d").unwrap();
        assert_eq!(schedule.attempts(), 5);
        assert_eq!(
            schedule.next_delay(4, 0.0, None),
            Some(Duration::from_secs(86_400))
        );
        assert_eq!(RetrySchedule::parse(""), Err(ScheduleError::Empty));
        assert!(matches!(
            RetrySchedule::parse("5x"),
            Err(ScheduleError::BadDuration(_))
        ));
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = Timestamp::from_millis(1_445_412_480_000); // Wed, 21 Oct 2015 07:28:00 GMT
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
