//! What happens after an attempt of a run fails (docs/design.md §3 "attempts"): the retry policy
//! of its schedule, checked once at the boundary ([`RetryPolicy::new`]) and asked one
//! question afterwards ([`RetryPolicy::delay_after`]): how long until the next attempt, or
//! none (the failed attempt was the last one: the run is dead-lettered).

use std::time::Duration;

use chrono::{DateTime, Utc};

use sha2::{Digest, Sha256};

use crate::Problem;

/// Most attempts a run may have (the first one included).
pub const MAX_ATTEMPTS: u32 = 100;
/// Most entries in `retry_intervals_s`.
pub const MAX_INTERVALS: usize = 100;
/// Longest single wait between attempts: 7 days.
pub const MAX_RETRY_WAIT_S: u32 = 7 * 24 * 3600;

/// When the attempts after a failure start.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryWait {
    /// Attempt `n + 1` waits `intervals[n - 1]` seconds after attempt `n` failed; the last
    /// value repeats.
    Intervals(Vec<u32>),
    /// Attempt `n + 1` waits `min(max_s, initial_s * multiplier^(n - 1))` seconds, less up to
    /// 10 % of deterministic jitter taken from the run key, so retries of many runs that
    /// failed together spread out, identically on every instance.
    Backoff {
        /// The first wait.
        initial_s: u32,
        /// Growth per attempt (at least 1).
        multiplier: f64,
        /// The longest wait.
        max_s: u32,
    },
}

/// A schedule's retry policy. The default is one attempt: no retry.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    max_attempts: u32,
    wait: Option<RetryWait>,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 1,
            wait: None,
        }
    }
}

impl RetryPolicy {
    /// Checks a policy: `max_attempts` in 1..=100; intervals 1..=100 entries, each 1 s to
    /// 7 days; a backoff with `initial_s` ≥ 1, `multiplier` ≥ 1, `initial_s` ≤ `max_s` ≤ 7
    /// days. No wait at all retries at once.
    ///
    /// # Errors
    /// Every broken rule, each naming its field.
    pub fn new(max_attempts: i64, wait: Option<RetryWait>) -> Result<RetryPolicy, Vec<Problem>> {
        let mut problems = Vec::new();
        if !(1..=i64::from(MAX_ATTEMPTS)).contains(&max_attempts) {
            problems.push(Problem::new(
                "max_attempts",
                format!("must be between 1 and {MAX_ATTEMPTS}, not {max_attempts}"),
            ));
        }
        match &wait {
            Some(RetryWait::Intervals(intervals)) => {
                if intervals.is_empty() || intervals.len() > MAX_INTERVALS {
                    problems.push(Problem::new(
                        "retry_intervals_s",
                        format!(
                            "must have 1 to {MAX_INTERVALS} entries, not {}",
                            intervals.len()
                        ),
                    ));
                }
                if let Some(bad) = intervals
                    .iter()
                    .find(|s| !(1..=MAX_RETRY_WAIT_S).contains(s))
                {
                    problems.push(Problem::new(
                        "retry_intervals_s",
                        format!(
                            "every interval must be 1 to {MAX_RETRY_WAIT_S} seconds, not {bad}"
                        ),
                    ));
                }
            }
            Some(RetryWait::Backoff {
                initial_s,
                multiplier,
                max_s,
            }) => {
                if !(1..=MAX_RETRY_WAIT_S).contains(initial_s) {
                    problems.push(Problem::new(
                        "retry_backoff.initial_s",
                        format!("must be 1 to {MAX_RETRY_WAIT_S} seconds, not {initial_s}"),
                    ));
                }
                if !(multiplier.is_finite() && *multiplier >= 1.0 && *multiplier <= 100.0) {
                    problems.push(Problem::new(
                        "retry_backoff.multiplier",
                        format!("must be at least 1 (and at most 100), not {multiplier}"),
                    ));
                }
                if max_s < initial_s || *max_s > MAX_RETRY_WAIT_S {
                    problems.push(Problem::new(
                        "retry_backoff.max_s",
                        format!(
                            "must be at least initial_s ({initial_s}) and at most \
                             {MAX_RETRY_WAIT_S} seconds, not {max_s}"
                        ),
                    ));
                }
            }
            None => {}
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(RetryPolicy {
            max_attempts: max_attempts as u32,
            wait,
        })
    }

    /// Attempts a run may have.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// How attempts wait.
    pub fn wait(&self) -> Option<&RetryWait> {
        self.wait.as_ref()
    }

    /// The wait before the attempt after `failed` (1-based), or `None` when `failed` was the
    /// last attempt. `key` is the run's idempotency key (the backoff's jitter source).
    pub fn delay_after(&self, failed: u32, key: &str) -> Option<Duration> {
        if failed >= self.max_attempts {
            return None;
        }
        let seconds = match &self.wait {
            None => 0.0,
            Some(RetryWait::Intervals(intervals)) => {
                let index = (failed as usize).saturating_sub(1).min(intervals.len() - 1);
                f64::from(intervals[index])
            }
            Some(RetryWait::Backoff {
                initial_s,
                multiplier,
                max_s,
            }) => {
                let exponent = i32::try_from(failed.saturating_sub(1)).unwrap_or(i32::MAX);
                let grown = f64::from(*initial_s) * multiplier.powi(exponent);
                let capped = grown.min(f64::from(*max_s));
                capped * (1.0 - 0.1 * unit_from(key, failed))
            }
        };
        Some(Duration::from_secs_f64(seconds))
    }

    /// When the attempt after `failed` starts, counted from `now`, or `None` when `failed`
    /// was the last attempt (the run is dead-lettered). A negative attempt number, which
    /// no stored run has, counts as the first.
    pub fn next_attempt_at(
        &self,
        failed: i32,
        key: &str,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let failed = u32::try_from(failed).unwrap_or(1);
        let wait = self.delay_after(failed, key)?;
        Some(now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX))
    }
}

/// A number in `[0, 1)` from `key` and `attempt`, the same on every instance.
fn unit_from(key: &str, attempt: u32) -> f64 {
    let digest = Sha256::digest(format!("{key}:{attempt}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(policy: &RetryPolicy, failed: u32) -> Option<f64> {
        policy.delay_after(failed, "k").map(|d| d.as_secs_f64())
    }

    #[test]
    fn one_attempt_by_default_never_retries() {
        assert_eq!(secs(&RetryPolicy::default(), 1), None);
    }

    #[test]
    fn intervals_are_used_in_order_and_the_last_repeats() {
        let policy = RetryPolicy::new(5, Some(RetryWait::Intervals(vec![60, 300]))).expect("ok");
        let waits: Vec<_> = (1..=5).map(|n| secs(&policy, n)).collect();
        assert_eq!(
            waits,
            [Some(60.0), Some(300.0), Some(300.0), Some(300.0), None]
        );
    }

    #[test]
    fn backoff_grows_is_capped_and_jitters_deterministically_below_the_wait() {
        let wait = RetryWait::Backoff {
            initial_s: 10,
            multiplier: 2.0,
            max_s: 35,
        };
        let policy = RetryPolicy::new(10, Some(wait)).expect("ok");
        for (failed, full) in [(1, 10.0), (2, 20.0), (3, 35.0), (9, 35.0)] {
            let got = secs(&policy, failed).expect("retry");
            assert!(got <= full && got >= full * 0.9, "{failed}: {got}");
            assert_eq!(secs(&policy, failed), Some(got), "deterministic");
        }
        assert_ne!(
            policy.delay_after(1, "a"),
            policy.delay_after(1, "b"),
            "runs that failed together spread out"
        );
        assert_eq!(secs(&policy, 10), None);
    }

    #[test]
    fn no_wait_retries_at_once() {
        let policy = RetryPolicy::new(2, None).expect("ok");
        assert_eq!(secs(&policy, 1), Some(0.0));
    }

    #[test]
    fn bad_policies_name_their_fields() {
        let fields = |max, wait| {
            RetryPolicy::new(max, wait)
                .expect_err("invalid")
                .into_iter()
                .map(|p| p.field)
                .collect::<Vec<_>>()
        };
        assert_eq!(fields(0, None), ["max_attempts"]);
        assert_eq!(fields(101, None), ["max_attempts"]);
        assert_eq!(
            fields(3, Some(RetryWait::Intervals(vec![]))),
            ["retry_intervals_s"]
        );
        assert_eq!(
            fields(3, Some(RetryWait::Intervals(vec![5, 0]))),
            ["retry_intervals_s"]
        );
        assert_eq!(
            fields(3, Some(RetryWait::Intervals(vec![1; 101]))),
            ["retry_intervals_s"]
        );
        let backoff = RetryWait::Backoff {
            initial_s: 10,
            multiplier: 0.5,
            max_s: 5,
        };
        assert_eq!(
            fields(3, Some(backoff)),
            ["retry_backoff.multiplier", "retry_backoff.max_s"]
        );
    }
}
