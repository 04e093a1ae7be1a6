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

    /// RFC 3339 in UTC with millisecond precision, as the API shows it: the fraction only
    /// when there is one, without trailing zeros (`2021-02-25T15:02:10.12Z`), as the `time`
    /// crate writes it; outside the years 0 to 9999, the epoch. Written by hand: every
    /// published message's answer carries one.
    pub fn to_rfc3339(self) -> String {
        let (days, millis) = (self.0.div_euclid(86_400_000), self.0.rem_euclid(86_400_000));
        let (year, month, day) = civil_from_days(days);
        if !(0..=9999).contains(&year) {
            return "1970-01-01T00:00:00Z".to_owned();
        }
        let (seconds, millis) = (millis / 1000, millis % 1000);
        let mut text = String::with_capacity(24);
        let mut digits = |value: i64, width: u32, after: char| {
            for place in (0..width).rev() {
                let digit = (value / 10_i64.pow(place)) % 10;
                text.push(char::from(b'0' + digit as u8));
            }
            text.push(after);
        };
        digits(year, 4, '-');
        digits(month, 2, '-');
        digits(day, 2, 'T');
        digits(seconds / 3600, 2, ':');
        digits(seconds / 60 % 60, 2, ':');
        if millis == 0 {
            digits(seconds % 60, 2, 'Z');
            return text;
        }
        digits(seconds % 60, 2, '.');
        let (millis, width) = match millis {
            _ if millis % 100 == 0 => (millis / 100, 1),
            _ if millis % 10 == 0 => (millis / 10, 2),
            _ => (millis, 3),
        };
        digits(millis, width, 'Z');
        text
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

/// The proleptic Gregorian (year, month, day) `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
    fn rfc3339_is_written_as_the_time_crate_writes_it() {
        let reference = |t: Timestamp| {
            OffsetDateTime::from_unix_timestamp_nanos(i128::from(t.as_millis()) * 1_000_000)
                .ok()
                .and_then(|t| t.format(&Rfc3339).ok())
                .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_owned())
        };
        let mut cases = vec![
            0,
            -1,
            1,
            10,
            100,
            120,
            999,
            1_000,
            951_782_400_000, // 2000-02-29
            1_614_265_330_123,
            253_402_300_799_999, // the last millisecond of 9999
            253_402_300_800_000, // 10000
            -62_167_219_200_000, // 0000-01-01
            -62_167_219_200_001, // before it
            i64::MAX,
            i64::MIN,
        ];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            // xorshift, over the years 0 to 9999 and a little beyond
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push((x % 330_000_000_000_000) as i64 - 65_000_000_000_000);
        }
        for millis in cases {
            let t = Timestamp::from_millis(millis);
            assert_eq!(t.to_rfc3339(), reference(t), "{millis}");
        }
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
