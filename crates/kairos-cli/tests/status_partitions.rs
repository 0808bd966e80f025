//! A partitioned status stream (`nats.status_partitions`), end to end: a nats-server whose
//! configuration maps `kairos.status.*` onto 4 partitions, two `kairos serve` instances
//! sharing them through PostgreSQL, an executor publishing on `kairos.status.<key>` as the
//! contract says. Each instance holds 2 partitions, every report arrives through a
//! partition's consumer and applies; when one instance is killed, the other takes its
//! partitions once their leases run out, and the reports published meanwhile apply.
//! Without the server's mapping, reports on `kairos.status.<key>` apply through the consumer
//! the instances share, and reports on the subject each launch message names
//! (`status_subject`) through the partitions.

use crate::support;

use std::time::{Duration, Instant};

use kairos_testkit::NatsServer;
use serde_json::{json, Value};
use support::Served;

const PARTITIONS: u16 = 4;
const ENV: [(&str, &str); 1] = [("KAIROS_NATS__STATUS_PARTITIONS", "4")];

/// Polls `check` every 200 ms until it returns `Some` (at most `within`).
fn eventually<T>(within: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The partitions held now, as `owner → count`, ordered by owner.
fn holders(served: &Served) -> Vec<(String, i64)> {
    served
        .psql_rows(
            "select owner, count(*) from status_partitions where lease_until > now() \
             group by owner order by owner",
        )
        .lines()
        .filter_map(|line| {
            let (owner, count) = line.split_once('|')?;
            Some((owner.to_string(), count.parse().ok()?))
        })
        .collect()
}

/// Triggers a run of `once` and waits until it is published; its key.
fn published_run(served: &Served, request: &str) -> String {
    let trigger = served.send(
        "POST",
        "/schedules/once/trigger",
        &json!({ "request_id": request }).to_string(),
    );
    assert!(trigger.contains(" 201 "), "{trigger}");
    let run: Value =
        serde_json::from_str(trigger.split("\r\n\r\n").nth(1).expect("a body")).expect("run JSON");
    let key = run["idempotency_key"].as_str().expect("key").to_string();
    eventually(Duration::from_secs(20), "the run is published", || {
        run_status(served, &key).filter(|status| status == "ENQUEUED")
    });
    key
}

fn run_status(served: &Served, key: &str) -> Option<String> {
    let answer = served.get(&format!("/runs/{key}"))?;
    let run: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1)?).ok()?;
    run["status"].as_str().map(str::to_string)
}

/// Publishes `STARTED` then `SUCCESS` for each of `keys` on `kairos.status.<key>`.
fn report_done(nats: &NatsServer, keys: &[String]) {
    let subjects: Vec<String> = keys
        .iter()
        .map(|key| format!("kairos.status.{key}"))
        .collect();
    report_done_on(nats, keys, &subjects);
}

/// Publishes `STARTED` then `SUCCESS` for each of `keys` on its subject in `subjects`.
fn report_done_on(nats: &NatsServer, keys: &[String], subjects: &[String]) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.expect("nats");
        let jetstream = async_nats::jetstream::new(client);
        for (key, subject) in keys.iter().zip(subjects) {
            for status in ["STARTED", "SUCCESS"] {
                let body = json!({ "idempotency_key": key, "status": status });
                let ack = jetstream
                    .publish(subject.clone(), body.to_string().into())
                    .await
                    .expect("publish");
                ack.await.expect("stored");
            }
        }
    });
}

/// The `status_subject` each launch message in `KAIROS_LAUNCH` names, by run key.
fn named_status_subjects(nats: &NatsServer) -> std::collections::HashMap<String, String> {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.expect("nats");
        let jetstream = async_nats::jetstream::new(client);
        let mut stream = jetstream.get_stream("KAIROS_LAUNCH").await.expect("stream");
        let state = stream.info().await.expect("info").state.clone();
        let mut named = std::collections::HashMap::new();
        for sequence in state.first_sequence..=state.last_sequence {
            let message = stream.get_raw_message(sequence).await.expect("a launch");
            let body: Value = serde_json::from_slice(&message.payload).expect("launch JSON");
            let key = body["idempotency_key"].as_str().expect("key").to_string();
            let subject = body["status_subject"].as_str().expect("status_subject");
            named.insert(key, subject.to_string());
        }
        named
    })
}

/// Deliveries so far by each partition's consumer, and by the consumer of unpartitioned
/// reports (a message delivered again counts again).
fn deliveries(nats: &NatsServer) -> (Vec<u64>, u64) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.expect("nats");
        let jetstream = async_nats::jetstream::new(client);
        let stream = jetstream.get_stream("KAIROS_STATUS").await.expect("stream");
        let mut partitions = Vec::new();
        for p in 0..PARTITIONS {
            let info = stream.consumer_info(format!("kairos-status-{p}")).await;
            partitions.push(info.map_or(0, |info| info.delivered.consumer_sequence));
        }
        let direct = stream
            .consumer_info("kairos-status-direct")
            .await
            .map_or(0, |info| info.delivered.consumer_sequence);
        (partitions, direct)
    })
}

/// Deploys workflow `wf` and schedule `once` (yearly, overlap `allow`, so triggers run).
fn deploy_once(served: &Served) {
    let dag = r#"{"dag": {"nodes": [{"id": "a"}]}}"#;
    let put = served.send("PUT", "/workflows/wf/versions/1", dag);
    assert!(put.contains(" 201 "), "{put}");
    let schedule = r#"{"schedule_id": "once", "workflow_id": "wf", "version": 1,
        "user_id": "u", "cron_expr": "0 0 1 1 *", "timezone": "UTC",
        "overlap_policy": "allow"}"#;
    let upsert = served.send("POST", "/schedules/upsert", schedule);
    assert!(upsert.contains(" 201 "), "{upsert}");
}

/// Set to partition before the server maps anything: reports on `kairos.status.<key>` apply
/// through the consumer every instance shares, and reports on the subject each launch names
/// through the partitions.
#[test]
fn without_a_server_mapping_reports_on_the_named_subject_reach_a_partition() {
    let roles = "api,planner,dispatcher,status";
    let served = Served::start_with_env(roles, "status_unmapped", NatsServer::start(), &ENV);
    deploy_once(&served);
    let keys: Vec<String> = (0..3)
        .map(|n| published_run(&served, &format!("unmapped-{n}")))
        .collect();
    report_done(&served.nats, &keys);
    for key in &keys {
        eventually(Duration::from_secs(20), "every run SUCCESS", || {
            run_status(&served, key).filter(|status| status == "SUCCESS")
        });
    }
    let (partitions, direct) = deliveries(&served.nats);
    assert_eq!(partitions.iter().sum::<u64>(), 0, "{partitions:?}");
    assert!(
        direct >= 6,
        "every report through kairos-status-direct: {direct}"
    );

    // Reports on the subject each launch names reach a partition without any mapping.
    let keys: Vec<String> = (0..3)
        .map(|n| published_run(&served, &format!("named-{n}")))
        .collect();
    let named = named_status_subjects(&served.nats);
    let subjects: Vec<String> = keys.iter().map(|key| named[key].clone()).collect();
    for (key, subject) in keys.iter().zip(&subjects) {
        assert!(
            subject.starts_with("kairos.status.") && subject.ends_with(&format!(".{key}")),
            "{subject}"
        );
        assert_eq!(
            subject.split('.').count(),
            4,
            "a partition's subject: {subject}"
        );
    }
    report_done_on(&served.nats, &keys, &subjects);
    for key in &keys {
        eventually(Duration::from_secs(20), "every run SUCCESS", || {
            run_status(&served, key).filter(|status| status == "SUCCESS")
        });
    }
    let (partitions, direct_after) = deliveries(&served.nats);
    assert!(
        partitions.iter().sum::<u64>() >= 6,
        "every report on a named subject came through a partition: {partitions:?}"
    );
    assert_eq!(direct_after, direct, "none through kairos-status-direct");
}

#[test]
fn partitions_are_shared_and_taken_over_and_every_report_applies() {
    let roles = "api,planner,dispatcher,status";
    let nats = NatsServer::start_mapping_status(PARTITIONS);
    let served = Served::start_with_env(roles, "status_partitions", nats, &ENV);
    let mut peer = served.peer("api,status", &ENV);

    let shared = eventually(Duration::from_secs(30), "two instances hold 2 each", || {
        let held = holders(&served);
        (held.len() == 2 && held.iter().all(|(_, n)| *n == 2)).then_some(held)
    });
    assert_eq!(shared.len(), 2, "{shared:?}");

    deploy_once(&served);

    let first: Vec<String> = (0..8)
        .map(|n| published_run(&served, &format!("first-{n}")))
        .collect();
    report_done(&served.nats, &first);
    for key in &first {
        eventually(Duration::from_secs(20), "every run SUCCESS", || {
            run_status(&served, key).filter(|status| status == "SUCCESS")
        });
    }
    let (partitions, direct) = deliveries(&served.nats);
    assert!(
        partitions.iter().sum::<u64>() >= 16,
        "every report came through a partition: {partitions:?}"
    );
    assert_eq!(direct, 0, "no report was left unpartitioned");

    // The peer dies without giving its partitions back: its leases run out and the
    // remaining instance takes all four.
    peer.child.kill().expect("kill the peer");
    peer.child.wait().expect("reap the peer");
    let second: Vec<String> = (0..8)
        .map(|n| published_run(&served, &format!("second-{n}")))
        .collect();
    report_done(&served.nats, &second);
    eventually(Duration::from_secs(40), "one instance holds all 4", || {
        let held = holders(&served);
        (held.len() == 1 && held[0].1 == i64::from(PARTITIONS)).then_some(())
    });
    for key in &second {
        eventually(Duration::from_secs(30), "every run SUCCESS", || {
            run_status(&served, key).filter(|status| status == "SUCCESS")
        });
    }
    let (partitions, _) = deliveries(&served.nats);
    assert!(partitions.iter().sum::<u64>() >= 32, "{partitions:?}");
}
