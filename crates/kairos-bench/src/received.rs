//! Applied − sent by when the executor received the launch: the runs received first wait
//! longest when their reports arrive before the dispatcher's round has recorded the run
//! (the intake cannot apply a report to a run a round still holds), and the runs received
//! last show whether the intake kept up with the executor. Per mark, in buckets of
//! [`BUCKET_S`] seconds after the tick.

use crate::percentile::percentile;

/// Width of a bucket, s.
pub const BUCKET_S: f64 = 2.0;

/// One run of a mark: ms after the tick when the executor received its launch, and ms
/// from its last report sent to the intake applying it, and ms after the tick when applied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Launch received, ms after the tick.
    pub received_ms: f64,
    /// Applied − sent, ms.
    pub lag_ms: f64,
    /// Applied, ms after the tick.
    pub applied_ms: f64,
}

/// The runs whose launch was received in one bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    /// Its start, s after the tick.
    pub from_s: f64,
    /// Runs in it.
    pub runs: usize,
    /// Applied − sent, ms: p50, p99.
    pub lag_ms: [f64; 2],
    /// Applied, ms after the tick: p50.
    pub applied_p50_ms: f64,
}

/// Groups `samples` by the bucket of their receipt, earliest first.
pub fn buckets(samples: &[Sample]) -> Vec<Bucket> {
    let mut by: std::collections::BTreeMap<i64, (Vec<f64>, Vec<f64>)> = Default::default();
    for s in samples {
        let bucket = (s.received_ms / 1000.0 / BUCKET_S).floor() as i64;
        let (lags, applied) = by.entry(bucket).or_default();
        lags.push(s.lag_ms);
        applied.push(s.applied_ms);
    }
    by.into_iter()
        .map(|(bucket, (mut lags, mut applied))| {
            lags.sort_by(f64::total_cmp);
            applied.sort_by(f64::total_cmp);
            Bucket {
                from_s: bucket as f64 * BUCKET_S,
                runs: lags.len(),
                lag_ms: [percentile(&lags, 0.50), percentile(&lags, 0.99)],
                applied_p50_ms: percentile(&applied, 0.50),
            }
        })
        .collect()
}

/// Prints every mark's buckets.
pub fn print(marks: &[(&str, &[Bucket])]) {
    println!(
        "applied - sent by when the executor received the launch (s after the tick):\n\
         {:<19} {:>10} {:>8} | applied - sent ms: {:>6} {:>6} | applied p50 ms after the tick",
        "ticks", "received", "runs", "p50", "p99"
    );
    for (label, buckets) in marks {
        for b in *buckets {
            println!(
                "{:<19} {:>10} {:>8} |                    {:>6.0} {:>6.0} | {:>10.0}",
                label,
                format!("{:.0}-{:.0} s", b.from_s, b.from_s + BUCKET_S),
                b.runs,
                b.lag_ms[0],
                b.lag_ms[1],
                b.applied_p50_ms
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(received_ms: f64, lag_ms: f64) -> Sample {
        Sample {
            received_ms,
            lag_ms,
            applied_ms: received_ms + lag_ms,
        }
    }

    #[test]
    fn runs_fall_in_the_bucket_of_their_receipt_earliest_first() {
        let samples = [
            sample(4_500.0, 100.0),
            sample(100.0, 6_000.0),
            sample(1_999.0, 4_000.0),
            sample(2_000.0, 3_000.0),
        ];
        let got = buckets(&samples);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!((got[0].from_s, got[0].runs), (0.0, 2));
        assert_eq!(got[0].lag_ms, [4_000.0, 6_000.0]);
        assert_eq!(got[0].applied_p50_ms, 5_999.0);
        assert_eq!((got[1].from_s, got[1].runs), (2.0, 1));
        assert_eq!((got[2].from_s, got[2].runs), (4.0, 1));
        assert_eq!(got[2].lag_ms, [100.0, 100.0]);
    }

    #[test]
    fn no_runs_no_buckets() {
        assert!(buckets(&[]).is_empty());
    }
}
