//! The metrics catalog of kairos: names, units, buckets, label sets, and one recording
//! function per fact. It imports nothing from the loops: the planner, dispatcher, intake and
//! registrar call these with plain counts after their transaction, never inside a claim. Which recorder receives them is the binary's choice (`kairos serve`
//! installs the one [`recorder`] builds, tests set one locally); with none installed every
//! call is a no-op.
//!
//! Labels take values from small fixed sets (reasons, statuses, outcomes): never a schedule
//! id, key or error text, so the number of series stays bounded.

use std::time::Duration;

use kairos_store::backlog::Backlog;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};

/// Histogram: seconds from a planner tick's `run_at` to the PubAck of its launch message
/// (`published_at - run_at`), observed once per tick moved to `ENQUEUED`.
pub const FIRE_DRIFT: &str = "kairos_fire_drift_seconds";
/// Gauge: unpaused schedules whose `next_run_at` is within the planner's lookahead.
pub const SCHEDULES_DUE: &str = "kairos_schedules_due";
/// Counter: run rows the planner wrote (ticks planned; a tick already present is not
/// counted).
pub const RUNS_PLANNED: &str = "kairos_runs_planned_total";
/// Counter: runs published and acknowledged by JetStream (`ENQUEUED`).
pub const RUNS_EMITTED: &str = "kairos_runs_emitted_total";
/// Counter: ticks that did not fire, by `reason` ([`SkipReason`]).
pub const RUNS_SKIPPED: &str = "kairos_runs_skipped_total";
/// Counter: runs set `QUEUED` behind an in-flight run (overlap `queue`).
pub const RUNS_QUEUED: &str = "kairos_runs_queued_total";
/// Counter: launch attempts that did not enqueue a run, by `reason` ([`LaunchFailure`]).
pub const RUNS_FAILED_LAUNCH: &str = "kairos_runs_failed_launch_total";
/// Counter: in-flight runs the sweep turned `TIMED_OUT`, by `reason` ([`TimeoutReason`]).
pub const RUNS_TIMED_OUT: &str = "kairos_runs_timed_out_total";
/// Counter: attempts scheduled after a failed or timed-out one (the run is `RETRYING`).
pub const RUN_RETRIES: &str = "kairos_run_retries_total";
/// Counter: launches published again because no executor started them in time.
pub const RUNS_REPUBLISHED: &str = "kairos_runs_republished_total";
/// Counter: runs whose last attempt failed or timed out (dead-lettered).
pub const RUNS_DEAD_LETTERED: &str = "kairos_runs_dead_lettered_total";
/// Counter: executor status reports (HTTP and NATS), by `status` and `outcome`
/// ([`StatusOutcome`]).
pub const STATUS_EVENTS: &str = "kairos_status_events_total";
/// Gauge: `PENDING` runs whose `fire_at` has come (due, not yet published).
pub const OUTBOX_PENDING: &str = "kairos_outbox_pending";
/// Gauge: seconds since the `fire_at` of the oldest due `PENDING` run (0 when none).
pub const OUTBOX_OLDEST: &str = "kairos_outbox_oldest_seconds";
/// Histogram: seconds per planner pass that claimed at least one schedule.
pub const PLANNER_PASS_DURATION: &str = "kairos_planner_pass_duration_seconds";
/// Histogram: seconds per dispatcher round that claimed at least one run.
pub const DISPATCHER_ROUND_DURATION: &str = "kairos_dispatcher_round_duration_seconds";
/// Histogram: seconds per status batch recorded (lock, decide, write, commit).
pub const STATUS_BATCH_DURATION: &str = "kairos_status_batch_duration_seconds";
/// Histogram: reports per status batch recorded.
pub const STATUS_BATCH_SIZE: &str = "kairos_status_batch_reports";
/// Counter: status reports put off because another transaction held their run (a
/// dispatcher round that has not committed its publish, or another instance's batch), each
/// time one is put off.
pub const STATUS_REPORTS_HELD: &str = "kairos_status_reports_held_total";
/// Counter: runs the sweep marked late (not `SUCCESS` by their deadline), once per run.
pub const RUNS_LATE: &str = "kairos_runs_late_total";
/// Gauge: runs past their deadline and not final now.
pub const RUNS_OVERDUE: &str = "kairos_runs_overdue";
/// Gauge: 1 while the launch stream of `region` answers with a leader, else 0 (one series
/// per configured region).
pub const REGION_READY: &str = "kairos_region_ready";
/// Counter: runs routed to a fallback region (their home's launch stream not ready for
/// `regions.fallback_after_s`), by `home` region and the `region` they went to.
pub const RUNS_FALLBACK: &str = "kairos_runs_fallback_total";
/// Counter: runs left `PENDING` because the launch stream of their region was not ready,
/// by `region`, each time one is.
pub const RUNS_HELD_FOR_REGION: &str = "kairos_runs_held_for_region_total";
/// Gauge, always 1: the running build, by `version`.
pub const BUILD_INFO: &str = "kairos_build_info";

/// Bucket bounds of [`FIRE_DRIFT`] (seconds): 1 ms to 60 s, 1-2-5 steps.
pub const DRIFT_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0,
];

/// Bucket bounds of [`STATUS_BATCH_SIZE`] (reports): 1 to the largest batch.
pub const BATCH_SIZE_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
];

/// Bucket bounds of the batch duration histograms (seconds): 1 ms to 30 s.
pub const BATCH_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];

/// Why a tick did not fire (`reason` of [`RUNS_SKIPPED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Overlap `skip`: a run of the schedule was in flight (run `SKIPPED`).
    Overlap,
    /// Older than the misfire grace and not caught up (catch-up `none`, or beyond
    /// `max_catchup`); counted, no run row.
    Missed,
    /// Inside a paused span; counted on resume, no run row.
    Paused,
    /// Overlap `queue` with `max_queued` runs already waiting (run `SKIPPED`).
    QueueFull,
    /// Overlap `buffer_one` or `cancel_other` with a run already waiting (run `SKIPPED`).
    BufferFull,
}

impl SkipReason {
    /// Every reason (exported at 0 from the start).
    pub const ALL: [SkipReason; 5] = [
        SkipReason::Overlap,
        SkipReason::Missed,
        SkipReason::Paused,
        SkipReason::QueueFull,
        SkipReason::BufferFull,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Overlap => "overlap",
            SkipReason::Missed => "missed",
            SkipReason::Paused => "paused",
            SkipReason::QueueFull => "queue_full",
            SkipReason::BufferFull => "buffer_full",
        }
    }
}

/// Why a launch did not enqueue a run (`reason` of [`RUNS_FAILED_LAUNCH`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchFailure {
    /// Unpublished longer than the launch deadline after `fire_at` (run `FAILED`).
    Deadline,
    /// Its workflow version is not stored (run `FAILED`).
    WorkflowMissing,
    /// The stream refused it for good, e.g. too large (run `FAILED`).
    Permanent,
    /// NATS unreachable or no PubAck in time; the run stays `PENDING` and is retried.
    Retryable,
    /// Published, re-published `max_republish` times, and never `STARTED` (attempt failed).
    NeverStarted,
}

impl LaunchFailure {
    /// Every reason (exported at 0 from the start).
    pub const ALL: [LaunchFailure; 5] = [
        LaunchFailure::Deadline,
        LaunchFailure::WorkflowMissing,
        LaunchFailure::Permanent,
        LaunchFailure::Retryable,
        LaunchFailure::NeverStarted,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            LaunchFailure::Deadline => "deadline",
            LaunchFailure::WorkflowMissing => "workflow_missing",
            LaunchFailure::Permanent => "permanent",
            LaunchFailure::Retryable => "retryable",
            LaunchFailure::NeverStarted => "never_started",
        }
    }
}

/// Why the sweep timed a run out (`reason` of [`RUNS_TIMED_OUT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutReason {
    /// In flight longer than its schedule's `max_run_seconds`.
    MaxRunSeconds,
    /// `STARTED` and silent longer than its schedule's `heartbeat_timeout_s`.
    Heartbeat,
}

impl TimeoutReason {
    /// Every reason (exported at 0 from the start).
    pub const ALL: [TimeoutReason; 2] = [TimeoutReason::MaxRunSeconds, TimeoutReason::Heartbeat];

    /// The label value (also the store's name for the cause).
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutReason::MaxRunSeconds => "max_run_seconds",
            TimeoutReason::Heartbeat => "heartbeat",
        }
    }
}

/// What a status report did (`outcome` of [`STATUS_EVENTS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOutcome {
    /// The run moved forward.
    Applied,
    /// A repeated or out-of-order report; the run stayed as it was.
    Unchanged,
    /// Another executor owns the run.
    Conflict,
    /// No run has that key.
    UnknownRun,
    /// The run was never published; no executor can be running it.
    Unpublished,
    /// Another run of the exclusive schedule is in flight.
    Blocked,
    /// The report broke a field rule (or, on NATS, could not be decoded).
    Invalid,
}

impl StatusOutcome {
    /// Every outcome (exported at 0 from the start).
    pub const ALL: [StatusOutcome; 7] = [
        StatusOutcome::Applied,
        StatusOutcome::Unchanged,
        StatusOutcome::Conflict,
        StatusOutcome::UnknownRun,
        StatusOutcome::Unpublished,
        StatusOutcome::Blocked,
        StatusOutcome::Invalid,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusOutcome::Applied => "applied",
            StatusOutcome::Unchanged => "unchanged",
            StatusOutcome::Conflict => "conflict",
            StatusOutcome::UnknownRun => "unknown_run",
            StatusOutcome::Unpublished => "unpublished",
            StatusOutcome::Blocked => "blocked",
            StatusOutcome::Invalid => "invalid",
        }
    }
}

/// A Prometheus recorder with these buckets (drift 1 ms to 60 s, batch durations 1 ms to
/// 30 s) and no listener of its own: `GET /metrics` renders its handle. The caller installs
/// it (`kairos serve`: globally, once) or sets it locally (tests). Histogram samples are
/// folded in at each render; a process that is never scraped should call `run_upkeep` on
/// the handle now and then.
pub fn recorder() -> PrometheusRecorder {
    let histograms = [
        (FIRE_DRIFT, DRIFT_BUCKETS),
        (PLANNER_PASS_DURATION, BATCH_BUCKETS),
        (DISPATCHER_ROUND_DURATION, BATCH_BUCKETS),
        (STATUS_BATCH_DURATION, BATCH_BUCKETS),
        (STATUS_BATCH_SIZE, BATCH_SIZE_BUCKETS),
    ];
    histograms
        .into_iter()
        .fold(PrometheusBuilder::new(), |builder, (name, buckets)| {
            builder
                .set_buckets_for_metric(Matcher::Full(name.to_string()), buckets)
                .expect("bucket lists are constant and non-empty")
        })
        .build_recorder()
}

/// Registers help text and units with the current recorder (call once after installing it).
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_histogram!(
        FIRE_DRIFT,
        Unit::Seconds,
        "PubAck time minus planned run_at, per planner tick enqueued"
    );
    describe_gauge!(
        SCHEDULES_DUE,
        "Unpaused schedules whose next_run_at is within the planner lookahead"
    );
    describe_counter!(RUNS_PLANNED, "Run rows written by the planner");
    describe_counter!(
        STATUS_REPORTS_HELD,
        "Status reports put off because another transaction held their run"
    );
    describe_counter!(RUNS_EMITTED, "Runs published and acknowledged (ENQUEUED)");
    describe_counter!(RUNS_SKIPPED, "Ticks that did not fire, by reason");
    describe_counter!(RUNS_QUEUED, "Runs queued behind an in-flight run");
    describe_counter!(
        RUNS_FAILED_LAUNCH,
        "Launches that did not enqueue, by reason"
    );
    describe_counter!(
        RUNS_TIMED_OUT,
        "Runs timed out, by reason (max_run_seconds, heartbeat)"
    );
    describe_counter!(RUN_RETRIES, "Attempts scheduled after a failed one");
    describe_counter!(
        RUNS_REPUBLISHED,
        "Launches published again because no executor started them in time"
    );
    describe_counter!(RUNS_DEAD_LETTERED, "Runs whose last attempt failed");
    describe_counter!(
        STATUS_EVENTS,
        "Executor status reports, by status and outcome"
    );
    describe_gauge!(OUTBOX_PENDING, "Due PENDING runs not yet published");
    describe_gauge!(
        OUTBOX_OLDEST,
        Unit::Seconds,
        "Age of the oldest due PENDING run since its fire_at"
    );
    describe_histogram!(
        PLANNER_PASS_DURATION,
        Unit::Seconds,
        "Planner passes that claimed schedules"
    );
    describe_histogram!(
        DISPATCHER_ROUND_DURATION,
        Unit::Seconds,
        "Dispatcher rounds that claimed runs"
    );
    describe_histogram!(
        STATUS_BATCH_DURATION,
        Unit::Seconds,
        "Status batches recorded (one transaction each)"
    );
    describe_histogram!(STATUS_BATCH_SIZE, "Reports per status batch recorded");
    describe_gauge!(BUILD_INFO, "The running kairos build (always 1)");
    describe_counter!(
        RUNS_LATE,
        "Runs marked late: not SUCCESS by run_at + deadline_s"
    );
    describe_gauge!(RUNS_OVERDUE, "Runs past their deadline and not final");
    describe_gauge!(
        REGION_READY,
        "1 while the region's launch stream answers with a leader"
    );
    describe_counter!(
        RUNS_FALLBACK,
        "Runs routed to a fallback region, by home and region"
    );
    describe_counter!(
        RUNS_HELD_FOR_REGION,
        "Runs left PENDING because their region's launch stream was not ready"
    );
}

/// Sets [`BUILD_INFO`]`{version}` to 1.
pub fn build_info(version: &'static str) {
    metrics::gauge!(BUILD_INFO, "version" => version).set(1.0);
}

/// How long a batch took, for the duration histograms only: this monotonic clock never
/// decides what is due (invariant "the database clock decides"), so the planner and
/// dispatcher read it through here.
#[derive(Debug, Clone, Copy)]
pub struct BatchTimer(std::time::Instant);

impl BatchTimer {
    /// Starts timing.
    pub fn start() -> BatchTimer {
        BatchTimer(std::time::Instant::now())
    }

    /// Time since [`BatchTimer::start`].
    pub fn elapsed(self) -> Duration {
        self.0.elapsed()
    }
}

/// The `status` label of [`STATUS_EVENTS`] for a report whose status could not be read.
pub const UNKNOWN_STATUS: &str = "unknown";

/// Exports every counter of a fixed label set at 0, so `rate()` and alerts work before the
/// first event (a counter the recorder has never seen is absent from `/metrics`). Call once
/// after installing the recorder.
pub fn zero() {
    // A histogram registered without a sample is exported with count 0, so the drift panel
    // and its alert have a series from the first scrape.
    let _ = metrics::histogram!(FIRE_DRIFT);
    for name in [
        RUNS_PLANNED,
        RUNS_EMITTED,
        RUNS_QUEUED,
        RUN_RETRIES,
        RUNS_DEAD_LETTERED,
        RUNS_REPUBLISHED,
        RUNS_LATE,
    ] {
        metrics::counter!(name).increment(0);
    }
    for reason in TimeoutReason::ALL {
        timed_out(reason, 0);
    }
    for reason in SkipReason::ALL {
        skipped(reason, 0);
    }
    for reason in LaunchFailure::ALL {
        failed_launch(reason, 0);
    }
    let statuses = kairos_core::Reported::ALL.map(kairos_core::Reported::as_str);
    for status in statuses.into_iter().chain([UNKNOWN_STATUS]) {
        for outcome in StatusOutcome::ALL {
            metrics::counter!(STATUS_EVENTS, "status" => status, "outcome" => outcome.as_str())
                .increment(0);
        }
    }
}

/// A planner pass that claimed schedules took `elapsed`.
pub fn pass_duration(elapsed: Duration) {
    metrics::histogram!(PLANNER_PASS_DURATION).record(elapsed.as_secs_f64());
}

/// A status batch of `reports` reports was recorded in `elapsed`.
pub fn status_batch(reports: usize, elapsed: Duration) {
    metrics::histogram!(STATUS_BATCH_DURATION).record(elapsed.as_secs_f64());
    metrics::histogram!(STATUS_BATCH_SIZE).record(reports as f64);
}

/// `n` status reports were put off: another transaction held their runs.
pub fn reports_held(n: usize) {
    metrics::counter!(STATUS_REPORTS_HELD).increment(n as u64);
}

/// A dispatcher round that claimed runs took `elapsed`.
pub fn round_duration(elapsed: Duration) {
    metrics::histogram!(DISPATCHER_ROUND_DURATION).record(elapsed.as_secs_f64());
}

/// `n` run rows written by the planner.
pub fn planned(n: u64) {
    metrics::counter!(RUNS_PLANNED).increment(n);
}

/// `n` runs published and acknowledged.
pub fn emitted(n: u64) {
    if n > 0 {
        metrics::counter!(RUNS_EMITTED).increment(n);
    }
}

/// `n` ticks that did not fire, for `reason`.
pub fn skipped(reason: SkipReason, n: u64) {
    metrics::counter!(RUNS_SKIPPED, "reason" => reason.as_str()).increment(n);
}

/// `n` runs queued behind an in-flight run.
pub fn queued(n: u64) {
    if n > 0 {
        metrics::counter!(RUNS_QUEUED).increment(n);
    }
}

/// Whether `region`'s launch stream is ready.
pub fn region_ready(region: &str, ready: bool) {
    metrics::gauge!(REGION_READY, "region" => region.to_string()).set(f64::from(u8::from(ready)));
}

/// One run of a schedule homed in `home` routed to the fallback region `region`.
pub fn fallback(home: &str, region: &str) {
    metrics::counter!(RUNS_FALLBACK, "home" => home.to_string(), "region" => region.to_string())
        .increment(1);
}

/// `n` runs left `PENDING` for `region`.
pub fn held_for_region(region: &str, n: u64) {
    metrics::counter!(RUNS_HELD_FOR_REGION, "region" => region.to_string()).increment(n);
}

/// `n` launches that did not enqueue, for `reason`.
pub fn failed_launch(reason: LaunchFailure, n: u64) {
    metrics::counter!(RUNS_FAILED_LAUNCH, "reason" => reason.as_str()).increment(n);
}

/// The fire drift of each planner tick enqueued (seconds from `run_at` to `published_at`).
pub fn drift(seconds: &[f64]) {
    if !seconds.is_empty() {
        let drift = metrics::histogram!(FIRE_DRIFT);
        for s in seconds {
            drift.record(*s);
        }
    }
}

/// `n` runs the sweep timed out, for `reason`.
pub fn timed_out(reason: TimeoutReason, n: u64) {
    metrics::counter!(RUNS_TIMED_OUT, "reason" => reason.as_str()).increment(n);
}

/// `n` launches published again (no executor started them in time).
pub fn republished(n: u64) {
    if n > 0 {
        metrics::counter!(RUNS_REPUBLISHED).increment(n);
    }
}

/// `n` attempts scheduled after a failure.
pub fn retried(n: u64) {
    if n > 0 {
        metrics::counter!(RUN_RETRIES).increment(n);
    }
}

/// `n` runs dead-lettered.
pub fn dead_lettered(n: u64) {
    if n > 0 {
        metrics::counter!(RUNS_DEAD_LETTERED).increment(n);
    }
}

/// One executor status report (`status`: a [`kairos_core::Reported`] name, or
/// [`UNKNOWN_STATUS`]).
pub fn status_event(status: &'static str, outcome: StatusOutcome) {
    metrics::counter!(STATUS_EVENTS, "status" => status, "outcome" => outcome.as_str())
        .increment(1);
}

/// Sets the backlog gauges.
pub fn record_backlog(backlog: &Backlog) {
    metrics::gauge!(OUTBOX_PENDING).set(backlog.pending as f64);
    metrics::gauge!(OUTBOX_OLDEST).set(backlog.oldest_seconds.max(0.0));
    metrics::gauge!(SCHEDULES_DUE).set(backlog.schedules_due as f64);
}

/// Reads the backlog (one statement, by the database's clock) and sets its gauges. Called
/// periodically by `kairos serve`, off the claim path.
///
/// # Errors
/// [`kairos_store::Error`] when the query fails; the gauges keep their last values.
pub async fn refresh_backlog(
    pool: &kairos_store::PgPool,
    lookahead: Duration,
) -> kairos_store::Result<Backlog> {
    let backlog = kairos_store::backlog::backlog(pool, lookahead.as_secs_f64(), None).await?;
    record_backlog(&backlog);
    Ok(backlog)
}

/// `n` runs marked late.
pub fn late(n: u64) {
    if n > 0 {
        metrics::counter!(RUNS_LATE).increment(n);
    }
}

/// Sets [`RUNS_OVERDUE`].
pub fn overdue(n: i64) {
    metrics::gauge!(RUNS_OVERDUE).set(n as f64);
}
