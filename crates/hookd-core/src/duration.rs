//! Durations written as text (`30s`, `5m`, `2h`, `5d`), as flags and configuration give them:
//! retry schedules, retention, key rotation overlaps and token lifetimes all read them the
//! same way.

use std::time::Duration;

/// Text that is not a duration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0:?} is not a duration (use e.g. 0, 30s, 5m, 2h, 1d)")]
pub struct DurationParseError(String);

/// A duration such as `0`, `30s`, `5m`, `2h` or `5d`.
pub fn parse_duration(text: &str) -> Result<Duration, DurationParseError> {
    let bad = || DurationParseError(text.to_owned());
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    Ok(Duration::from_secs(
        number.checked_mul(seconds).ok_or_else(bad)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_seconds_minutes_hours_and_days() {
        let secs = |text| parse_duration(text).map(|d| d.as_secs());
        assert_eq!(secs("0"), Ok(0));
        assert_eq!(secs("30"), Ok(30));
        assert_eq!(secs("30s"), Ok(30));
        assert_eq!(secs("5m"), Ok(300));
        assert_eq!(secs("2h"), Ok(7_200));
        assert_eq!(secs("5d"), Ok(432_000));
    }

    #[test]
    fn other_text_is_refused_with_examples() {
        for bad in ["", "5x", "m", "-5s", "99999999999999999999d"] {
            let error = parse_duration(bad).unwrap_err();
            assert!(error.to_string().contains("e.g. 0, 30s"), "{bad}: {error}");
        }
    }
}
