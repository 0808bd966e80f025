//! Response bodies (the only `Serialize` types of the HTTP surface) and the request readers
//! that turn JSON into registrar inputs. Timestamps are RFC 3339 UTC with `Z`.

use chrono::{DateTime, Utc};
use kairos_registrar::{
    rfc3339, BackoffInput, Calendar, RulesInput, Run, RunRef, Schedule, ScheduleInput,
    ScheduleStats, Skip, VersionSummary, WorkflowSummary,
};
use serde::Serialize;
use serde_json::Value;

use crate::body::Fields;

/// An optional timestamp as RFC 3339 (`null` when absent).
fn time(at: Option<DateTime<Utc>>) -> Option<String> {
    at.map(rfc3339)
}

/// Answer of `POST /schedules/upsert`.
#[derive(Debug, Serialize)]
pub(crate) struct UpsertAnswer {
    pub schedule_id: String,
    pub next_run_at: Option<String>,
    pub revision: i64,
}

impl UpsertAnswer {
    pub(crate) fn of(schedule: &Schedule) -> UpsertAnswer {
        UpsertAnswer {
            schedule_id: schedule.schedule_id.clone(),
            next_run_at: time(schedule.next_run_at),
            revision: schedule.revision,
        }
    }
}

/// `POST /schedules/upsert`: the upsert's answer and what it did (`created`, `updated`, or
/// `unchanged` when every field was as stored).
#[derive(Debug, Serialize)]
pub(crate) struct UpsertedBody {
    #[serde(flatten)]
    pub answer: UpsertAnswer,
    pub outcome: &'static str,
}

impl UpsertedBody {
    pub(crate) fn of(upserted: &kairos_registrar::Upserted) -> UpsertedBody {
        let outcome = match (upserted.created, upserted.unchanged) {
            (true, _) => "created",
            (false, true) => "unchanged",
            (false, false) => "updated",
        };
        UpsertedBody {
            answer: UpsertAnswer::of(&upserted.schedule),
            outcome,
        }
    }
}

/// `POST /schedules/{id}/backfill`: how many ticks the range has, how many runs this call
/// wrote, and how many ticks already had one.
#[derive(Debug, Serialize)]
pub(crate) struct BackfillBody {
    pub ticks: u64,
    pub created: u64,
    pub already_present: u64,
}

/// A page of runs (`GET /runs`, `GET /dead-letters`, `GET /schedules/{id}/runs`).
#[derive(Debug, Serialize)]
pub(crate) struct RunPageBody {
    pub runs: Vec<RunBody>,
    pub next_cursor: Option<String>,
}

impl RunPageBody {
    pub(crate) fn of(page: kairos_registrar::RunPage) -> RunPageBody {
        RunPageBody {
            runs: page.runs.into_iter().map(RunBody::of).collect(),
            next_cursor: page.next_cursor,
        }
    }
}

/// A page of schedules (`GET /schedules`).
#[derive(Debug, Serialize)]
pub(crate) struct SchedulePageBody {
    pub schedules: Vec<ScheduleBody>,
    pub next_cursor: Option<String>,
}

/// A page of workflows (`GET /workflows`).
#[derive(Debug, Serialize)]
pub(crate) struct WorkflowPageBody {
    pub workflows: Vec<WorkflowSummaryBody>,
    pub next_cursor: Option<String>,
}

/// A workflow's stored versions (`GET /workflows/{id}/versions`).
#[derive(Debug, Serialize)]
pub(crate) struct VersionsBody {
    pub workflow_id: String,
    pub versions: Vec<VersionBody>,
}

/// Every named calendar (`GET /calendars`).
#[derive(Debug, Serialize)]
pub(crate) struct CalendarsBody {
    pub calendars: Vec<CalendarBody>,
}

/// A schedule's skipped ticks (`GET /schedules/{id}/skips`).
#[derive(Debug, Serialize)]
pub(crate) struct SkipsBody {
    pub skips: Vec<SkipBody>,
}

/// `PUT /workflows/{id}/versions/{v}`: the version stored (or found stored), the schedules
/// the deploy wrote and those it removed.
#[derive(Debug, Serialize)]
pub(crate) struct DeployedBody {
    pub workflow_id: String,
    pub version: i64,
    pub created: bool,
    pub schedules: Vec<UpsertAnswer>,
    pub removed: Vec<String>,
}

/// `GET /workflows/{id}/versions/{v}`: one stored version.
#[derive(Debug, Serialize)]
pub(crate) struct WorkflowBody {
    pub workflow_id: String,
    pub version: i32,
    pub dag: Value,
    pub created_at: String,
}

/// `POST /runs/{key}/cancel`: the run, what the cancel did (`cancelled`, `cancelling`,
/// `already_cancelling`, `finished`) and a sentence saying so.
#[derive(Debug, Serialize)]
pub(crate) struct CancelledBody {
    #[serde(flatten)]
    pub run: RunBody,
    pub cancel: &'static str,
    pub message: String,
}

/// `PUT /calendars/{name}`: the calendar and the schedules it was replanned for.
#[derive(Debug, Serialize)]
pub(crate) struct CalendarWrittenBody {
    #[serde(flatten)]
    pub calendar: CalendarBody,
    pub replanned: Vec<String>,
}

/// A schedule as `GET /schedules/{id}` and `GET /schedules` show it.
#[derive(Debug, Serialize)]
pub(crate) struct ScheduleBody {
    pub schedule_id: String,
    pub workflow_id: String,
    pub version: i32,
    pub user_id: String,
    pub cron_expr: String,
    pub timezone: String,
    pub start_at: Option<String>,
    pub end_at: Option<String>,
    pub next_run_at: Option<String>,
    pub paused: bool,
    pub jitter_ms: i32,
    pub overlap_policy: &'static str,
    pub catchup_policy: &'static str,
    pub priority: i32,
    pub max_run_seconds: Option<i32>,
    pub max_queued: Option<i32>,
    pub max_in_flight: Option<i32>,
    pub max_attempts: i32,
    pub retry_intervals_s: Option<Vec<i32>>,
    pub retry_backoff: Option<BackoffBody>,
    pub heartbeat_timeout_s: Option<i32>,
    pub start_timeout_s: Option<i32>,
    pub exclude: Vec<String>,
    pub exclude_calendars: Vec<String>,
    pub roll: &'static str,
    pub dst_gap: Option<&'static str>,
    pub dst_fold: Option<&'static str>,
    /// `{parent_schedule_id, on}` for a chained schedule (`@after`), else `null`.
    pub chain: Option<ChainBody>,
    pub max_runs: Option<i32>,
    /// `max_runs` minus the scheduled runs created so far; `null` without `max_runs`.
    pub remaining_runs: Option<i64>,
    /// Seconds after its tick by which each planned run must be final; `null`: none.
    pub deadline_s: Option<i32>,
    /// The region its runs launch in; `null`: none.
    pub region: Option<String>,
    /// Where its runs launch, in order, while its region is unavailable.
    pub fallback_regions: Vec<String>,
    pub pause_note: Option<String>,
    /// When a paused schedule resumes by itself; `null`: not paused, or until resumed.
    pub paused_until: Option<String>,
    /// Who paused it; `null` while it runs.
    pub paused_by: Option<String>,
    pub revision: i64,
    pub created_at: String,
    pub updated_at: String,
    /// Why a chained schedule cannot fire (`GET /schedules/{id}` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_on: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<StatsBody>,
}

/// A chained schedule's parent and the outcome it waits for.
#[derive(Debug, Serialize)]
pub(crate) struct ChainBody {
    pub parent_schedule_id: String,
    pub on: &'static str,
}

impl ScheduleBody {
    /// `s` with its next fire (`next_run_at`: the registrar's one rule for a schedule's
    /// next fire, pauses and skips applied) and, for `GET /schedules/{id}`, its preview.
    pub(crate) fn of(
        s: Schedule,
        next_fire: Option<DateTime<Utc>>,
        preview: Option<Vec<DateTime<Utc>>>,
    ) -> ScheduleBody {
        let chain = kairos_store::timing::chain(&s).map(|chain| ChainBody {
            parent_schedule_id: chain.parent,
            on: chain.on.as_str(),
        });
        let remaining_runs = s.remaining_runs();
        ScheduleBody {
            schedule_id: s.schedule_id,
            workflow_id: s.workflow_id,
            version: s.version,
            user_id: s.user_id,
            cron_expr: s.cron_expr,
            timezone: s.timezone,
            start_at: time(s.start_at),
            end_at: time(s.end_at),
            next_run_at: time(next_fire),
            paused: s.paused,
            jitter_ms: s.jitter_ms,
            overlap_policy: s.overlap_policy.as_str(),
            catchup_policy: s.catchup_policy.as_str(),
            priority: s.priority,
            max_run_seconds: s.max_run_seconds,
            max_queued: s.max_queued,
            max_in_flight: s.max_in_flight,
            max_attempts: s.failure.max_attempts,
            retry_backoff: match (
                s.failure.retry_backoff_initial_s,
                s.failure.retry_backoff_multiplier,
                s.failure.retry_backoff_max_s,
            ) {
                (Some(initial_s), Some(multiplier), Some(max_s)) => Some(BackoffBody {
                    initial_s,
                    multiplier,
                    max_s,
                }),
                _ => None,
            },
            retry_intervals_s: s.failure.retry_intervals_s,
            heartbeat_timeout_s: s.failure.heartbeat_timeout_s,
            start_timeout_s: s.failure.start_timeout_s,
            roll: s.rules.roll.as_str(),
            dst_gap: s.rules.dst_gap.map(|g| g.as_str()),
            dst_fold: s.rules.dst_fold.map(|f| f.as_str()),
            exclude: s.rules.exclude,
            exclude_calendars: s.rules.exclude_calendars,
            chain,
            max_runs: s.max_runs,
            remaining_runs,
            deadline_s: s.deadline_s,
            region: s.region,
            fallback_regions: s.fallback_regions,
            pause_note: s.pause_note,
            paused_until: time(s.paused_until),
            paused_by: s.paused_by,
            waiting_on: None,
            revision: s.revision,
            created_at: rfc3339(s.created_at),
            updated_at: rfc3339(s.updated_at),
            preview: preview.map(|ticks| ticks.into_iter().map(rfc3339).collect()),
            stats: None,
        }
    }

    /// The schedule with its statistics (`GET /schedules/{id}` only).
    pub(crate) fn with_stats(mut self, stats: &ScheduleStats) -> ScheduleBody {
        self.stats = Some(StatsBody::of(stats));
        self
    }
}

/// A schedule's statistics in `GET /schedules/{id}`.
#[derive(Debug, Serialize)]
pub(crate) struct StatsBody {
    /// Tick of the newest launched run.
    pub last_fire_at: Option<String>,
    /// That run's status now.
    pub last_status: Option<&'static str>,
    pub missed_ticks: i64,
    pub skipped_ticks: i64,
    pub runs_examined: i64,
    pub last_not_launched: Option<RunRefBody>,
    pub planner_error: Option<String>,
    pub why: Option<String>,
}

/// A run named by the statistics.
#[derive(Debug, Serialize)]
pub(crate) struct RunRefBody {
    pub run_at: String,
    pub status: &'static str,
    pub reason: Option<String>,
    pub last_error: Option<String>,
}

impl StatsBody {
    fn of(stats: &ScheduleStats) -> StatsBody {
        let run = |r: &RunRef| RunRefBody {
            run_at: rfc3339(r.run_at),
            status: r.status.as_str(),
            reason: r.reason.clone(),
            last_error: r.last_error.clone(),
        };
        StatsBody {
            last_fire_at: stats.last_fire.as_ref().map(|r| rfc3339(r.run_at)),
            last_status: stats.last_fire.as_ref().map(|r| r.status.as_str()),
            missed_ticks: stats.missed_ticks,
            skipped_ticks: stats.skipped_ticks,
            runs_examined: stats.runs_examined,
            last_not_launched: stats.last_not_launched.as_ref().map(run),
            planner_error: stats.planner_error.clone(),
            why: stats.why(),
        }
    }
}

/// A run as `GET /schedules/{id}/runs` shows it.
#[derive(Debug, Serialize)]
pub(crate) struct RunBody {
    pub idempotency_key: String,
    pub schedule_id: String,
    pub run_at: String,
    pub fire_at: String,
    pub status: &'static str,
    pub source: &'static str,
    pub workflow_id: String,
    pub version: i32,
    pub user_id: String,
    pub run_id: Option<String>,
    pub attempts: i32,
    /// The attempt in progress (or the last one).
    pub attempt: i32,
    /// When the next attempt starts, while the run is `RETRYING`.
    pub next_attempt_at: Option<String>,
    pub heartbeat_at: Option<String>,
    pub dead_lettered_at: Option<String>,
    pub reason: Option<String>,
    pub last_error: Option<String>,
    pub published_at: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub executor_id: Option<String>,
    /// For a chained run: the key of the parent's run that fired it.
    pub parent_key: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// The schedule's revision that produced the run (set once, when it was written).
    pub schedule_revision: Option<i64>,
    /// By when it must be final; `null`: no deadline.
    pub deadline_at: Option<String>,
    /// When it was found late (a mark, not a status); `null`: not late.
    pub late_at: Option<String>,
    /// What it did by its deadline, when late.
    pub late_reason: Option<String>,
    /// The region its launch was recorded for (its schedule's region, or a fallback);
    /// `null`: not launched yet, or launched without a region.
    pub region: Option<String>,
}

impl RunBody {
    pub(crate) fn of(r: Run) -> RunBody {
        RunBody {
            idempotency_key: r.idempotency_key,
            schedule_id: r.schedule_id,
            run_at: rfc3339(r.run_at),
            fire_at: rfc3339(r.fire_at),
            status: r.status.as_str(),
            source: r.source.as_str(),
            workflow_id: r.workflow_id,
            version: r.version,
            user_id: r.user_id,
            run_id: r.run_id,
            attempts: r.attempts,
            attempt: r.attempt,
            next_attempt_at: (r.status == kairos_core::RunStatus::Retrying)
                .then(|| rfc3339(r.fire_at)),
            heartbeat_at: time(r.heartbeat_at),
            dead_lettered_at: time(r.dead_lettered_at),
            reason: r.reason,
            last_error: r.last_error,
            published_at: time(r.published_at),
            started_at: time(r.started_at),
            finished_at: time(r.finished_at),
            executor_id: r.executor_id,
            parent_key: r.parent_key,
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
            schedule_revision: r.schedule_revision,
            deadline_at: time(r.deadline_at),
            late_at: time(r.late_at),
            late_reason: r.late_reason,
            region: r.launch_region,
        }
    }
}

/// One finished attempt of a run (`GET /runs/{key}` `history`).
#[derive(Debug, Serialize)]
pub(crate) struct AttemptBody {
    pub attempt: i32,
    pub status: &'static str,
    pub error: Option<String>,
    pub executor_id: Option<String>,
    pub run_id: Option<String>,
    pub published_at: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: String,
}

impl AttemptBody {
    pub(crate) fn of(a: kairos_registrar::Attempt) -> AttemptBody {
        AttemptBody {
            attempt: a.attempt,
            status: a.status.as_str(),
            error: a.error,
            executor_id: a.executor_id,
            run_id: a.run_id,
            published_at: time(a.published_at),
            started_at: time(a.started_at),
            finished_at: rfc3339(a.finished_at),
        }
    }
}

/// What the executor reported of one attempt's logs (`GET /runs/{key}` `logs`).
#[derive(Debug, Serialize)]
pub(crate) struct AttemptLogBody {
    pub attempt: i32,
    pub log_url: Option<String>,
    pub output: Option<String>,
    pub updated_at: String,
}

impl AttemptLogBody {
    pub(crate) fn of(log: kairos_registrar::AttemptLog) -> AttemptLogBody {
        AttemptLogBody {
            attempt: log.attempt,
            log_url: log.log_url,
            output: log.output,
            updated_at: rfc3339(log.updated_at),
        }
    }
}

/// `GET /runs/{key}`: the run, the attempts its schedule allows, its finished attempts and
/// the logs its executors reported.
#[derive(Debug, Serialize)]
pub(crate) struct RunViewBody {
    #[serde(flatten)]
    pub run: RunBody,
    pub max_attempts: i32,
    pub history: Vec<AttemptBody>,
    pub logs: Vec<AttemptLogBody>,
}

impl RunViewBody {
    pub(crate) fn of(view: kairos_registrar::RunView) -> RunViewBody {
        RunViewBody {
            run: RunBody::of(view.run),
            max_attempts: view.max_attempts,
            history: view.history.into_iter().map(AttemptBody::of).collect(),
            logs: view.logs.into_iter().map(AttemptLogBody::of).collect(),
        }
    }
}

/// A schedule's `retry_backoff` as shown.
#[derive(Debug, Serialize)]
pub(crate) struct BackoffBody {
    pub initial_s: i32,
    pub multiplier: f64,
    pub max_s: i32,
}

/// Reads an upsert body (or one entry of a deploy's `schedules`). In a deploy,
/// `workflow_id` and `version` default to the path's.
pub(crate) fn schedule_input(fields: &mut Fields, deploy: Option<(&str, i64)>) -> ScheduleInput {
    let required = deploy.is_none();
    let workflow_id = fields.string("workflow_id", required);
    let version = fields.integer("version", required);
    ScheduleInput {
        schedule_id: fields.string("schedule_id", false),
        workflow_id: workflow_id
            .or_else(|| deploy.map(|d| d.0.to_string()))
            .unwrap_or_default(),
        version: version.or(deploy.map(|d| d.1)).unwrap_or(0),
        user_id: fields.string("user_id", true).unwrap_or_default(),
        cron_expr: fields.string("cron_expr", true).unwrap_or_default(),
        timezone: fields.string("timezone", true).unwrap_or_default(),
        start_at: fields.time("start_at", false),
        end_at: fields.time("end_at", false),
        jitter_ms: fields.integer("jitter_ms", false),
        overlap_policy: fields.string("overlap_policy", false),
        catchup_policy: fields.string("catchup_policy", false),
        priority: fields.integer("priority", false),
        max_run_seconds: fields.integer("max_run_seconds", false),
        max_queued: fields.integer("max_queued", false),
        max_in_flight: fields.integer("max_in_flight", false),
        max_attempts: fields.integer("max_attempts", false),
        retry_intervals_s: intervals(fields),
        retry_backoff: backoff(fields),
        heartbeat_timeout_s: fields.integer("heartbeat_timeout_s", false),
        start_timeout_s: fields.integer("start_timeout_s", false),
        revision: fields.integer("revision", false),
        rules: rules_input(fields),
        max_runs: fields.integer("max_runs", false),
        deadline_s: fields.integer("deadline_s", false),
        region: fields.string("region", false),
        fallback_regions: fields.strings("fallback_regions"),
    }
}

/// Reads `exclude`, `exclude_calendars`, `roll`, `dst_gap`, `dst_fold`.
pub(crate) fn rules_input(fields: &mut Fields) -> RulesInput {
    RulesInput {
        exclude: fields.strings("exclude"),
        exclude_calendars: fields.strings("exclude_calendars"),
        roll: fields.string("roll", false),
        dst_gap: fields.string("dst_gap", false),
        dst_fold: fields.string("dst_fold", false),
    }
}

/// A calendar as `GET /calendars/{name}` shows it.
#[derive(Debug, Serialize)]
pub(crate) struct CalendarBody {
    pub name: String,
    pub description: String,
    pub dates: Vec<String>,
    pub revision: i64,
    pub created_at: String,
    pub updated_at: String,
}

impl CalendarBody {
    pub(crate) fn of(c: Calendar) -> CalendarBody {
        CalendarBody {
            name: c.name,
            description: c.description,
            dates: c
                .dates
                .iter()
                .map(|d| d.format("%Y-%m-%d").to_string())
                .collect(),
            revision: c.revision,
            created_at: rfc3339(c.created_at),
            updated_at: rfc3339(c.updated_at),
        }
    }
}

/// `retry_intervals_s`: an array of whole seconds.
fn intervals(fields: &mut Fields) -> Option<Vec<i64>> {
    let items = fields.array("retry_intervals_s", false)?;
    let seconds: Option<Vec<i64>> = items
        .iter()
        .map(|item| match item {
            Value::Number(n) => crate::body::whole(n),
            _ => None,
        })
        .collect();
    if seconds.is_none() {
        fields.absorb(vec![kairos_registrar::Problem::new(
            fields.field_name("retry_intervals_s"),
            "must be an array of whole seconds",
        )]);
    }
    seconds
}

/// `retry_backoff`: `{initial_s, multiplier, max_s}`.
fn backoff(fields: &mut Fields) -> Option<BackoffInput> {
    let value = fields.value("retry_backoff", false)?;
    let mut inner = Fields::new(value, &fields.field_name("retry_backoff"));
    let initial_s = inner.integer("initial_s", true);
    let multiplier = inner.number("multiplier", true);
    let max_s = inner.integer("max_s", true);
    let problems = inner.finish();
    let parsed = match (initial_s, multiplier, max_s) {
        (Some(initial_s), Some(multiplier), Some(max_s)) if problems.is_empty() => {
            Some(BackoffInput {
                initial_s,
                multiplier,
                max_s,
            })
        }
        _ => None,
    };
    fields.absorb(problems);
    parsed
}

/// Reads a deploy's `schedules` array.
pub(crate) fn schedule_list(
    items: Vec<Value>,
    workflow_id: &str,
    version: i64,
    outer: &mut Fields,
) -> Vec<ScheduleInput> {
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let mut fields = Fields::new(item, &format!("schedules[{index}]"));
            let input = schedule_input(&mut fields, Some((workflow_id, version)));
            outer.absorb(fields.finish());
            input
        })
        .collect()
}

/// The answer of a dry-run (`?dry_run=true` on an upsert or a deploy): what the change would
/// do per schedule (with `skipped`: the operator's skips among its fire times before and
/// after, which will not run); nothing was stored.
pub(crate) fn dry_run_body(dry: kairos_registrar::DryRun) -> Value {
    let schedules: Vec<Value> = dry
        .schedules
        .into_iter()
        .map(|one| {
            serde_json::json!({
                "schedule_id": one.schedule_id,
                "change": one.change.as_str(),
                "next_fire_times_before": one.before.into_iter().map(rfc3339).collect::<Vec<_>>(),
                "next_fire_times_after": one.after.into_iter().map(rfc3339).collect::<Vec<_>>(),
                "runs_cancelled": one.runs_cancelled,
                "skipped": one.skips.into_iter().map(SkipBody::of)
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({
        "dry_run": true,
        "workflow_created": dry.workflow_created,
        "schedules": schedules,
    })
}

/// The answer of a write that may create: 201 with `Location` naming what it created, or
/// 200 when it already existed (updated, replaced, or the same request again).
pub(crate) fn written(
    created: bool,
    location: String,
    body: impl axum::response::IntoResponse,
) -> axum::response::Response {
    use axum::http::{header, HeaderValue, StatusCode};
    use axum::response::IntoResponse;
    if !created {
        return (StatusCode::OK, body).into_response();
    }
    let mut response = (StatusCode::CREATED, body).into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// One skip: `{schedule_id, run_at, note, skipped_by, reason, created_at}`.
#[derive(Debug, Serialize)]
pub(crate) struct SkipBody {
    pub schedule_id: String,
    pub run_at: String,
    pub note: Option<String>,
    pub skipped_by: String,
    /// What the tick's run says: `skipped by <who>: <note>`.
    pub reason: String,
    pub created_at: String,
}

impl SkipBody {
    pub(crate) fn of(skip: Skip) -> SkipBody {
        SkipBody {
            reason: skip.reason(),
            run_at: rfc3339(skip.run_at),
            created_at: rfc3339(skip.created_at),
            schedule_id: skip.schedule_id,
            note: skip.note,
            skipped_by: skip.skipped_by,
        }
    }
}

/// One workflow in `GET /workflows`.
#[derive(Debug, Serialize)]
pub(crate) struct WorkflowSummaryBody {
    pub workflow_id: String,
    pub versions: i64,
    pub latest_version: i32,
    pub latest_created_at: String,
    pub schedules: i64,
}

impl WorkflowSummaryBody {
    pub(crate) fn of(w: WorkflowSummary) -> WorkflowSummaryBody {
        WorkflowSummaryBody {
            latest_created_at: rfc3339(w.latest_created_at),
            workflow_id: w.workflow_id,
            versions: w.versions,
            latest_version: w.latest_version,
            schedules: w.schedules,
        }
    }
}

/// One version in `GET /workflows/{id}/versions`.
#[derive(Debug, Serialize)]
pub(crate) struct VersionBody {
    pub version: i32,
    pub created_at: String,
    pub schedules: i64,
}

impl VersionBody {
    pub(crate) fn of(v: VersionSummary) -> VersionBody {
        VersionBody {
            version: v.version,
            created_at: rfc3339(v.created_at),
            schedules: v.schedules,
        }
    }
}
