//! Time: reading the clock, parsing timestamps strictly, and the replay window. The Standard
//! Webhooks and Stripe verifiers share these, and tests pin "now" instead of sleeping.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::VerifyError;

/// The default distance, in seconds, a timestamp may be from now in either direction.
pub const DEFAULT_TOLERANCE: u64 = 300;

/// The system clock in unix seconds (0 if the clock is before 1970).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Parses a timestamp header strictly: ASCII digits only (no sign, spaces or fraction), fitting
/// a `u64`.
pub fn parse_timestamp(value: &str) -> Result<u64, VerifyError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::InvalidTimestamp);
    }
    value.parse().map_err(|_| VerifyError::InvalidTimestamp)
}

/// How far a message's timestamp may be from "now", and which "now" to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    tolerance: u64,
    now: Option<u64>,
}

impl Default for TimeWindow {
    /// ±[`DEFAULT_TOLERANCE`] seconds around the system clock.
    fn default() -> Self {
        Self {
            tolerance: DEFAULT_TOLERANCE,
            now: None,
        }
    }
}

impl TimeWindow {
    /// Allows timestamps up to `seconds` away from now, in both directions.
    pub fn tolerance(mut self, seconds: u64) -> Self {
        self.tolerance = seconds;
        self
    }

    /// Uses `unix_seconds` as "now" instead of the system clock.
    pub fn now(mut self, unix_seconds: u64) -> Self {
        self.now = Some(unix_seconds);
        self
    }

    /// Checks that `timestamp` lies within the window.
    pub fn check(&self, timestamp: u64) -> Result<(), VerifyError> {
        let now = self.now.unwrap_or_else(unix_now);
        let tolerance = self.tolerance;
        if now.saturating_sub(timestamp) > tolerance {
            Err(VerifyError::TimestampTooOld {
                timestamp,
                now,
                tolerance,
            })
        } else if timestamp.saturating_sub(now) > tolerance {
            Err(VerifyError::TimestampTooNew {
                timestamp,
                now,
                tolerance,
            })
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_must_be_plain_digits() {
        for bad in [
            "",
            "hello",
            "+5",
            " 5",
            "5 ",
            "-5",
            "5.0",
            "1e9",
            "0x10",
            "99999999999999999999",
            "٣",
        ] {
            assert_eq!(
                parse_timestamp(bad),
                Err(VerifyError::InvalidTimestamp),
                "{bad:?}"
            );
        }
        assert_eq!(parse_timestamp("1614265330"), Ok(1_614_265_330));
        assert_eq!(parse_timestamp("0"), Ok(0));
    }

    #[test]
    fn window_is_inclusive_both_ways() {
        let w = TimeWindow::default().now(1000);
        assert_eq!(w.check(700), Ok(()));
        assert_eq!(w.check(1300), Ok(()));
        assert!(matches!(
            w.check(699),
            Err(VerifyError::TimestampTooOld { .. })
        ));
        assert!(matches!(
            w.check(1301),
            Err(VerifyError::TimestampTooNew { .. })
        ));
        assert!(matches!(
            w.tolerance(0).check(1001),
            Err(VerifyError::TimestampTooNew { .. })
        ));
        assert!(matches!(
            w.check(0),
            Err(VerifyError::TimestampTooOld { .. })
        ));
        assert!(matches!(
            w.check(u64::MAX),
            Err(VerifyError::TimestampTooNew { .. })
        ));
        assert_eq!(w.tolerance(u64::MAX).check(u64::MAX), Ok(()));
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(unix_now() > 1_577_836_800);
    }
}
