//! The bench schedules, registered by deploy sync through the first instance, and what
//! that cost.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::fleet::Fleet;
use crate::setup::WORKFLOW;
use crate::Args;

/// The spec of bench schedule `i`.
fn spec(args: &Args, i: usize) -> String {
    if args.spread() {
        return format!("{} * * * * *", i % 60);
    }
    match args.every_s {
        Some(every) => format!("*/{every} * * * * *"),
        None => "* * * * *".to_string(),
    }
}

/// What registering the schedules cost.
#[derive(Debug, Clone)]
pub struct Deploy {
    /// Wall time of the deploy sync request.
    pub elapsed: Duration,
    /// The highest RSS high-water mark of an instance right after it (MiB).
    pub rss_hwm_mib: f64,
}

/// Schedules per deploy: one workflow's deploy of 10,000 is about 3 MiB, inside the
/// default `http.max_body_bytes`.
const PER_DEPLOY: usize = 10_000;

/// Registers the bench schedules by deploy sync (`PUT /workflows/bench-<w>/versions/1` with
/// `schedules`, 10,000 per workflow) through the first instance.
pub async fn schedules(args: &Args, fleet: &mut Fleet) -> Result<Deploy> {
    let client = reqwest::Client::new();
    let started = Instant::now();
    for (w, first) in (0..args.schedules).step_by(PER_DEPLOY).enumerate() {
        let last = (first + PER_DEPLOY).min(args.schedules);
        let schedules: Vec<serde_json::Value> = (first..last)
            .map(|i| {
                let mut schedule = serde_json::json!({
                    "schedule_id": format!("bench-{i}"),
                    "user_id": "bench",
                    "cron_expr": spec(args, i),
                    "timezone": "UTC",
                    "overlap_policy": args.overlap,
                });
                if args.fail_share > 0.0 {
                    schedule["max_attempts"] = serde_json::json!(2);
                    schedule["retry_intervals_s"] = serde_json::json!([1]);
                }
                schedule
            })
            .collect();
        let workflow = format!("{WORKFLOW}-{w}");
        kairos_testkit::deploy::workflow(
            &client,
            &fleet.base_url(0),
            &workflow,
            schedules,
            Duration::from_secs(600),
        )
        .await
        .map_err(anyhow::Error::msg)?;
    }
    let elapsed = started.elapsed();
    let rss_hwm_mib = fleet
        .usage()
        .iter()
        .map(|u| u.rss_hwm_mib)
        .fold(0.0, f64::max);
    Ok(Deploy {
        elapsed,
        rss_hwm_mib,
    })
}
