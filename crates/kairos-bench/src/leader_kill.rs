//! `--kill-stream-leader-ms`: the launch stream's leader in the bench's JetStream cluster
//! (`--nats-cluster`) killed with SIGKILL in the middle of the first measured burst. The
//! instances' publishes then fail over to the new leader; the marks count every tick
//! received once, and the stream and the database are compared at the end.

use chrono::{DateTime, Utc};

use crate::setup::Scratch;
use crate::Args;

/// The stream whose leader is killed.
const STREAM: &str = "KAIROS_LAUNCH";

/// Arms the kill for `tick + --kill-stream-leader-ms`, when both options are given.
pub fn arm(args: &Args, scratch: &Scratch, tick: DateTime<Utc>) {
    let (Some(after_ms), Some(cluster)) = (args.kill_stream_leader_ms, scratch.cluster.clone())
    else {
        return;
    };
    let at = tick + chrono::TimeDelta::milliseconds(after_ms as i64);
    tokio::spawn(async move {
        if let Ok(left) = (at - Utc::now()).to_std() {
            tokio::time::sleep(left).await;
        }
        let killed = tokio::task::spawn_blocking(move || {
            let mut cluster = cluster.lock().expect("not poisoned");
            let leader = cluster.stream_leader(STREAM)?;
            cluster.kill(leader);
            Some(leader)
        })
        .await
        .ok()
        .flatten();
        let late_ms = (Utc::now() - tick).num_milliseconds();
        match killed {
            Some(node) => eprintln!(
                "bench: killed {STREAM}'s leader n{node} (SIGKILL) at +{late_ms} ms after the tick"
            ),
            None => eprintln!("bench: no leader of {STREAM} to kill at +{late_ms} ms"),
        }
    });
}
