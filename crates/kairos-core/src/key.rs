//! Run keys and jitter (docs/design.md §2 invariant "one row per tick", §4 policies).
//!
//! - A tick's key is `hex(sha256(schedule_id ":" epoch_seconds(run_at)))`, always from the
//!   planned `run_at`, never from the jittered `fire_at`.
//! - A manual trigger's key is `hex(sha256(schedule_id ":manual:" request_id))`. Ids cannot
//!   contain `:` (see `validate_id`), so the two key spaces never meet.
//! - Jitter is derived from the key, so every instance computes the same `fire_at`.

use std::fmt;

use chrono::{DateTime, Duration, Utc};
use sha2::{Digest, Sha256};

/// Largest jitter accepted: one hour either way.
pub const MAX_JITTER_MS: u32 = 3_600_000;

/// The idempotency key of one run: 64 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey(String);

impl RunKey {
    /// The key of the tick of `schedule_id` planned at `run_at` (sub-second part ignored).
    pub fn tick(schedule_id: &str, run_at: DateTime<Utc>) -> RunKey {
        RunKey::digest(&format!("{schedule_id}:{}", run_at.timestamp()))
    }

    /// The key of a manual trigger of `schedule_id` with the caller's `request_id`.
    pub fn manual(schedule_id: &str, request_id: &str) -> RunKey {
        RunKey::digest(&format!("{schedule_id}:manual:{request_id}"))
    }

    /// The key for re-launching a run on purpose: `key:attempt`, a new message id.
    pub fn attempt_msg_id(&self, attempt: u32) -> String {
        format!("{}:{attempt}", self.0)
    }

    fn digest(input: &str) -> RunKey {
        RunKey(hex::encode(Sha256::digest(input.as_bytes())))
    }

    /// The key as hex.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The deterministic jitter of a run: uniform in `[-jitter_ms, +jitter_ms]` milliseconds,
/// taken from the key's first 8 bytes, so `fire_at = run_at + jitter_offset(key, jitter_ms)`
/// is the same on every instance.
pub fn jitter_offset(key: &RunKey, jitter_ms: u32) -> Duration {
    if jitter_ms == 0 {
        return Duration::zero();
    }
    let jitter_ms = jitter_ms.min(MAX_JITTER_MS);
    let mut bytes = [0u8; 8];
    // Invariant: a RunKey is 64 hex characters, so its first 16 decode to 8 bytes.
    hex::decode_to_slice(&key.0[..16], &mut bytes).expect("run keys are hex");
    let span = 2 * u64::from(jitter_ms) + 1;
    let offset = (u64::from_be_bytes(bytes) % span) as i64 - i64::from(jitter_ms);
    Duration::milliseconds(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("rfc3339")
    }

    #[test]
    fn tick_key_is_sha256_of_id_and_epoch_seconds() {
        let key = RunKey::tick("nightly-etl", at("2026-03-09T07:00:00Z"));
        let expected = hex::encode(Sha256::digest(b"nightly-etl:1773039600"));
        assert_eq!(key.as_str(), expected);
        // Sub-second parts of run_at do not change the key.
        assert_eq!(
            key,
            RunKey::tick("nightly-etl", at("2026-03-09T07:00:00.250Z"))
        );
        assert_ne!(key, RunKey::tick("nightly-etl", at("2026-03-09T07:00:01Z")));
    }

    #[test]
    fn manual_keys_are_their_own_space() {
        let manual = RunKey::manual("s1", "req-1");
        assert_eq!(manual, RunKey::manual("s1", "req-1"));
        assert_ne!(manual, RunKey::manual("s1", "req-2"));
        assert_eq!(
            manual.as_str(),
            hex::encode(Sha256::digest(b"s1:manual:req-1"))
        );
        assert_eq!(
            RunKey::tick("s1", at("2026-01-01T00:00:00Z"))
                .as_str()
                .len(),
            64
        );
    }

    #[test]
    fn jitter_is_deterministic_bounded_and_spread() {
        assert_eq!(
            jitter_offset(&RunKey::manual("s", "r"), 0),
            Duration::zero()
        );
        let jitter_ms = 500;
        let offsets: Vec<i64> = (0..2_000)
            .map(|i| {
                let key = RunKey::tick("s", DateTime::from_timestamp(i * 60, 0).expect("t"));
                let offset = jitter_offset(&key, jitter_ms);
                assert_eq!(
                    offset,
                    jitter_offset(&key, jitter_ms),
                    "same key, same offset"
                );
                offset.num_milliseconds()
            })
            .collect();
        assert!(offsets.iter().all(|o| (-500..=500).contains(o)));
        // Uniform-ish: both halves used, extremes approached.
        let negative = offsets.iter().filter(|o| **o < 0).count();
        assert!(
            (800..1200).contains(&negative),
            "negative offsets: {negative}"
        );
        assert!(offsets.iter().any(|o| *o < -450) && offsets.iter().any(|o| *o > 450));
    }
}
