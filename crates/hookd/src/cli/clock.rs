//! The clock `serve` runs on: the system clock, or, for end-to-end tests of schedules that
//! span hours, the system clock plus an offset a test moves from outside the process.
//!
//! Retry schedules run for days, and a test of "the receiver was down for 40 minutes" must not
//! wait 40 minutes. In-process tests hand the engine a `ManualClock`; a test of the real binary
//! cannot, so `HOOKD_TEST_CLOCK_OFFSET_FILE` names a file holding a number of milliseconds that
//! is added to the system time on every reading. It is an environment variable only (no flag,
//! not in `--help`), hookd logs a warning when it is set, and without it the system clock is
//! used unchanged.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use hookd_core::{Clock, SystemClock, Timestamp};

const OFFSET_FILE_VAR: &str = "HOOKD_TEST_CLOCK_OFFSET_FILE";

/// The system clock, or the test clock when `HOOKD_TEST_CLOCK_OFFSET_FILE` is set.
pub fn from_env() -> Arc<dyn Clock> {
    match std::env::var_os(OFFSET_FILE_VAR) {
        Some(path) => {
            tracing::warn!(
                path = %PathBuf::from(&path).display(),
                "{OFFSET_FILE_VAR} is set: time is shifted by the offset in that file (tests only)"
            );
            Arc::new(OffsetFileClock {
                path: path.into(),
                last_offset: AtomicI64::new(0),
            })
        }
        None => Arc::new(SystemClock),
    }
}

/// System time plus the milliseconds written in `path`, read afresh on every reading so a test
/// can move time forward while hookd runs. A file being rewritten (empty or partial) keeps the
/// last offset read.
struct OffsetFileClock {
    path: PathBuf,
    last_offset: AtomicI64,
}

impl Clock for OffsetFileClock {
    fn now(&self) -> Timestamp {
        let read = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|text| text.trim().parse::<i64>().ok());
        let offset = match read {
            Some(offset) => {
                self.last_offset.store(offset, Ordering::SeqCst);
                offset
            }
            None => self.last_offset.load(Ordering::SeqCst),
        };
        Timestamp::from_millis(SystemClock.now().as_millis().saturating_add(offset))
    }
}
