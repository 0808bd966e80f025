//! A schedule's failure handling in its stored form, and the [`RetryPolicy`] it stands for.

use crate::{RetryPolicy, RetryWait};

/// A schedule's failure handling as stored: its retry policy and heartbeat timeout. The
/// table's CHECKs admit only policies [`RetryPolicy::new`] accepts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FailurePolicy {
    /// Attempts a run may have (1: no retry).
    pub max_attempts: i32,
    /// Waits between attempts, in seconds (the last repeats).
    pub retry_intervals_s: Option<Vec<i32>>,
    /// Exponential backoff: the first wait.
    pub retry_backoff_initial_s: Option<i32>,
    /// Exponential backoff: growth per attempt.
    pub retry_backoff_multiplier: Option<f64>,
    /// Exponential backoff: the longest wait.
    pub retry_backoff_max_s: Option<i32>,
    /// A STARTED run silent this long is timed out.
    pub heartbeat_timeout_s: Option<i32>,
    /// An ENQUEUED run not started this long is re-published (NULL: the configured
    /// default; 0: never).
    pub start_timeout_s: Option<i32>,
}

impl FailurePolicy {
    /// The stored form of a retry policy and heartbeat timeout.
    pub fn of(
        policy: &RetryPolicy,
        heartbeat_timeout_s: Option<u32>,
        start_timeout_s: Option<u32>,
    ) -> FailurePolicy {
        let to_i32 = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
        let mut stored = FailurePolicy {
            max_attempts: to_i32(policy.max_attempts()),
            heartbeat_timeout_s: heartbeat_timeout_s.map(to_i32),
            start_timeout_s: start_timeout_s.map(to_i32),
            ..FailurePolicy::default()
        };
        match policy.wait() {
            Some(RetryWait::Intervals(intervals)) => {
                stored.retry_intervals_s = Some(intervals.iter().copied().map(to_i32).collect());
            }
            Some(RetryWait::Backoff {
                initial_s,
                multiplier,
                max_s,
            }) => {
                stored.retry_backoff_initial_s = Some(to_i32(*initial_s));
                stored.retry_backoff_multiplier = Some(*multiplier);
                stored.retry_backoff_max_s = Some(to_i32(*max_s));
            }
            None => {}
        }
        stored
    }

    /// The retry policy (the table's CHECKs make a stored one always valid; one that is
    /// not, after a manual edit, retries nothing).
    pub fn retry_policy(&self) -> RetryPolicy {
        let to_u32 = |n: i32| u32::try_from(n).unwrap_or(0);
        let wait = match (
            &self.retry_intervals_s,
            self.retry_backoff_initial_s,
            self.retry_backoff_multiplier,
            self.retry_backoff_max_s,
        ) {
            (Some(intervals), _, _, _) => Some(RetryWait::Intervals(
                intervals.iter().copied().map(to_u32).collect(),
            )),
            (None, Some(initial_s), Some(multiplier), Some(max_s)) => Some(RetryWait::Backoff {
                initial_s: to_u32(initial_s),
                multiplier,
                max_s: to_u32(max_s),
            }),
            _ => None,
        };
        RetryPolicy::new(i64::from(self.max_attempts), wait).unwrap_or_default()
    }
}
