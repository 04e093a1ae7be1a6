//! Time: the [`Timestamp`] every record carries and the [`Clock`] that produces it.
//!
//! Retry schedules span days, so nothing in hookd reads the system time directly: it asks a
//! [`Clock`], and tests hand in a [`ManualClock`] they move by hand.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ::time::OffsetDateTime;
use ::time::format_description::well_known::Rfc3339;

/// A point in time as unix milliseconds (UTC), the form both databases store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

/// Text that is not an RFC 3339 date-time.
#[derive(Debug, thiserror::Error)]
#[error("not an RFC 3339 date-time (e.g. 2026-01-31T12:00:00Z): {0}")]
pub struct TimestampParseError(String);

impl Timestamp {
    /// The timestamp `millis` milliseconds after the unix epoch.
    pub const fn from_millis(millis: i64) -> Self {
        Self(millis)
    }

    /// Milliseconds since the unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// Whole seconds since the unix epoch (the `webhook-timestamp` unit).
    pub const fn as_secs(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// This timestamp moved forward by `duration` (saturating).
    pub fn plus(self, duration: Duration) -> Self {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(millis))
    }

    /// This timestamp moved back by `duration` (saturating).
    pub fn minus(self, duration: Duration) -> Self {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_sub(millis))
    }

    /// RFC 3339 in UTC with millisecond precision, as the API shows it.
    pub fn to_rfc3339(self) -> String {
        let nanos = i128::from(self.0) * 1_000_000;
        OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .ok()
            .and_then(|t| t.format(&Rfc3339).ok())
            .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_owned())
    }

    /// Parses an RFC 3339 date-time with any offset.
    pub fn parse_rfc3339(text: &str) -> Result<Self, TimestampParseError> {
        let parsed = OffsetDateTime::parse(text, &Rfc3339)
            .map_err(|e| TimestampParseError(e.to_string()))?;
        let millis = parsed.unix_timestamp_nanos() / 1_000_000;
        i64::try_from(millis)
            .map(Self)
            .map_err(|_| TimestampParseError("out of range".to_owned()))
    }
}

/// The source of "now" for everything that schedules or stamps.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The real wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A clock that only moves when told to; for tests of schedules that span days.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self(AtomicI64::new(start.0))
    }

    /// Moves the clock forward by `duration`.
    pub fn advance(&self, duration: Duration) {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(millis, Ordering::SeqCst);
    }

    /// Sets the clock to `at`.
    pub fn set(&self, at: Timestamp) {
        self.0.store(at.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

/// Readings of a clock, each at least a millisecond after the one before: batches stamped with
/// them never share a millisecond, so the ids of a later batch sort above an earlier one's
/// (ids made in an older millisecond than another thread's newest are not ordered between
/// batches; see [`crate::MessageId::run`]).
#[derive(Debug)]
pub struct StrictlyLater(AtomicI64);

impl Default for StrictlyLater {
    fn default() -> Self {
        Self(AtomicI64::new(i64::MIN))
    }
}

impl StrictlyLater {
    /// `clock`'s time, or a millisecond after the last reading when that is later.
    pub fn now(&self, clock: &dyn Clock) -> Timestamp {
        let now = clock.now().0;
        let previous = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
                Some(now.max(last.saturating_add(1)))
            })
            .expect("the update always succeeds");
        Timestamp(now.max(previous.saturating_add(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strictly_later_readings_never_repeat_a_millisecond() {
        let clock = ManualClock::new(Timestamp::from_millis(1_000));
        let readings = StrictlyLater::default();
        let first = readings.now(&clock);
        let second = readings.now(&clock);
        clock.advance(Duration::from_millis(10));
        let third = readings.now(&clock);
        assert_eq!(
            [first, second, third].map(|t| t.as_millis()),
            [1_000, 1_001, 1_010]
        );
    }

    #[test]
    fn rfc3339_round_trips_with_millis() {
        let t = Timestamp::from_millis(1_614_265_330_123);
        assert_eq!(t.to_rfc3339(), "2021-02-25T15:02:10.123Z");
        assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()).unwrap(), t);
    }

    #[test]
    fn rfc3339_parses_offsets() {
        let t = Timestamp::parse_rfc3339("2021-02-25T16:02:10+01:00").unwrap();
        assert_eq!(t.as_secs(), 1_614_265_330);
        assert!(Timestamp::parse_rfc3339("yesterday").is_err());
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(Timestamp::from_millis(1_000));
        assert_eq!(clock.now().as_millis(), 1_000);
        clock.advance(Duration::from_secs(5 * 60));
        assert_eq!(clock.now().as_millis(), 301_000);
    }
}
