//! Per-token API rate limits, so one token (a customer's portal session, a runaway script)
//! cannot take the API from everyone else.
//!
//! Each token gets a GCRA bucket ("generic cell rate algorithm": a token bucket kept as one
//! timestamp) allowing `limit` requests per second with bursts of up to `limit`. Buckets live in
//! this process's memory: with several hookd processes behind a balancer, each applies the
//! limit to what it sees. Time comes from the API's [`hookd_core::Clock`], so tests are exact.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use hookd_core::Timestamp;

/// Past this many buckets, ones that are full again are forgotten before adding another.
const SWEEP_ABOVE: usize = 10_000;

/// Every token's bucket: the theoretical arrival time of its next request (GCRA's TAT), in
/// microseconds.
#[derive(Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<String, i64>>,
}

impl RateLimiter {
    /// Counts one request of `token` at `now` against `per_second`: `Err(wait)` when it is over
    /// the limit (nothing counted), with how long until a request would be allowed.
    pub fn check(&self, token: &str, per_second: u32, now: Timestamp) -> Result<(), Duration> {
        let now = now.as_millis() * 1000;
        let interval = 1_000_000 / i64::from(per_second.max(1));
        let burst = interval * i64::from(per_second.max(1));
        let mut buckets = self.buckets.lock().expect("rate limiter poisoned");
        if buckets.len() > SWEEP_ABOVE {
            buckets.retain(|_, tat| *tat > now);
        }
        let tat = buckets.get(token).copied().unwrap_or(now).max(now);
        let allowed_at = tat + interval - burst;
        if allowed_at > now {
            return Err(Duration::from_micros((allowed_at - now) as u64));
        }
        buckets.insert(token.to_owned(), tat + interval);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_the_limit_passes_then_one_request_per_interval() {
        let limiter = RateLimiter::default();
        let t0 = Timestamp::from_millis(1_000_000);
        for _ in 0..3 {
            limiter.check("a", 3, t0).unwrap();
        }
        let wait = limiter.check("a", 3, t0).unwrap_err();
        assert_eq!(wait, Duration::from_micros(333_333));
        limiter.check("b", 3, t0).expect("buckets are per token");
        let later = t0.plus(Duration::from_millis(334));
        limiter.check("a", 3, later).unwrap();
        assert!(limiter.check("a", 3, later).is_err());
    }

    #[test]
    fn a_refused_request_is_not_counted() {
        let limiter = RateLimiter::default();
        let t0 = Timestamp::from_millis(1_000_000);
        limiter.check("a", 1, t0).unwrap();
        for _ in 0..10 {
            assert!(limiter.check("a", 1, t0).is_err());
        }
        limiter
            .check("a", 1, t0.plus(Duration::from_secs(1)))
            .expect("one second later the bucket has room again");
    }
}
