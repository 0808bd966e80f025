//! What callers send ([`ScheduleInput`], [`PreviewInput`]), the registrar's [`Settings`],
//! and the checks that need no database: every field against its rule, all problems at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use kairos_core::{
    parse_zone, validate_id, CatchupPolicy, FailurePolicy, NamedCalendar, OverlapPolicy,
    RetryPolicy, RetryWait, Spec, Timetable, Tz, MAX_ID_LEN, MAX_JITTER_MS,
};
use sha2::{Digest, Sha256};

use crate::error::Problem;
use crate::rules::{self, rfc3339, CheckedRules, RulesInput};

/// Registrar behaviour taken from configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The smallest gap allowed between two ticks of a schedule (docs/design.md §6).
    pub min_interval: Duration,
    /// When set, the only zones a schedule may use.
    pub allowed_zones: Option<Vec<String>>,
    /// Used when an upsert names no overlap policy.
    pub default_overlap: OverlapPolicy,
    /// Used when an upsert names no catch-up policy.
    pub default_catchup: CatchupPolicy,
    /// Used when an upsert names no jitter.
    pub default_jitter_ms: u32,
    /// Fixes "now" instead of reading the database clock (tests only).
    pub pinned_now: Option<DateTime<Utc>>,
    /// Largest DAG a deploy accepts, so that every launch message fits in one NATS
    /// message. Shared by clones: setting it once NATS is connected updates every registrar.
    pub dag_limit: DagLimit,
    /// The deployment's regions (`regions.names`): the only values `region` and
    /// `fallback_regions` may take. Empty: no schedule may name a region.
    pub regions: Vec<String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            min_interval: Duration::seconds(1),
            allowed_zones: None,
            default_overlap: OverlapPolicy::default(),
            default_catchup: CatchupPolicy::default(),
            default_jitter_ms: 0,
            pinned_now: None,
            dag_limit: DagLimit::default(),
            regions: Vec::new(),
        }
    }
}

/// The largest DAG (compact JSON, as published in the launch message) a deploy accepts.
///
/// A handle: clones share one value, so the process that connects to NATS can lower or
/// raise the limit of registrars already built ([`DagLimit::set_from_max_payload`]).
#[derive(Debug, Clone)]
pub struct DagLimit(Arc<AtomicUsize>);

impl DagLimit {
    /// The NATS server's default `max_payload` (1 MiB), used until the server tells its own.
    pub const NATS_DEFAULT_MAX_PAYLOAD: usize = 1_048_576;

    /// Bytes of a launch message reserved for everything around the DAG.
    ///
    /// The message adds the run key (64 hex digits), schedule, workflow and user ids (at most
    /// 200 characters each, never escaped: ids are plain ASCII), the version, two RFC 3339
    /// times, source and attempt, plus the field names; NATS counts the `Nats-Msg-Id` header
    /// against `max_payload` too. That is about 1 KiB at most; 2 KiB leaves room for a field
    /// or two more without revisiting this number.
    pub const LAUNCH_ENVELOPE_HEADROOM: usize = 2048;

    /// A limit of `bytes` for the DAG itself.
    pub fn new(bytes: usize) -> DagLimit {
        DagLimit(Arc::new(AtomicUsize::new(bytes)))
    }

    /// Sets the limit for the DAG itself to `bytes`.
    pub fn set(&self, bytes: usize) {
        // Relaxed: a lone number, read independently of any other memory.
        self.0.store(bytes, Ordering::Relaxed);
    }

    /// Sets the limit from the NATS server's `max_payload` (as the connection reports it),
    /// keeping [`DagLimit::LAUNCH_ENVELOPE_HEADROOM`] for the rest of the launch message.
    pub fn set_from_max_payload(&self, max_payload: usize) {
        self.set(max_payload.saturating_sub(DagLimit::LAUNCH_ENVELOPE_HEADROOM));
    }

    /// The limit for the DAG itself, in bytes.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// The `max_payload` this limit stands for (the limit plus the headroom).
    pub fn max_payload(&self) -> usize {
        self.get()
            .saturating_add(DagLimit::LAUNCH_ENVELOPE_HEADROOM)
    }
}

impl Default for DagLimit {
    /// The limit for a server with the default `max_payload`.
    fn default() -> DagLimit {
        DagLimit::new(DagLimit::NATS_DEFAULT_MAX_PAYLOAD - DagLimit::LAUNCH_ENVELOPE_HEADROOM)
    }
}

/// Schedule ids that are the registrar's verbs under `/schedules/` in the HTTP API
/// (`POST /schedules/upsert`, `/pause`, `/preview`): a schedule so named would collide with
/// those routes (`DELETE /schedules/preview` is a 405, not a delete).
pub const RESERVED_SCHEDULE_IDS: [&str; 3] = ["upsert", "pause", "preview"];

/// Longest `cron_expr`, in characters. The longest useful expression (every value of every
/// field listed) is about 550; the bound keeps stored rows and list pages small.
pub const MAX_CRON_EXPR_LEN: usize = 1000;

/// Longest `timezone`, in characters (IANA names are at most 32).
pub const MAX_TIMEZONE_LEN: usize = 64;

/// Longest `overlap_policy` or `catchup_policy`, in characters (the names are at most 16).
pub const MAX_POLICY_LEN: usize = 32;

/// Most runs in flight `max_in_flight` may allow.
pub const MAX_IN_FLIGHT: i64 = 1000;
/// Longest `deadline_s`: a year, in seconds (the bound the `schedules` table checks too).
pub const MAX_DEADLINE_S: i32 = 31_536_000;

/// Pushes a problem and answers false when `value` is longer than `max` characters, so the
/// value is neither parsed nor echoed in an error.
pub(crate) fn within(problems: &mut Vec<Problem>, field: &str, value: &str, max: usize) -> bool {
    let len = value.chars().count();
    if len > max {
        problems.push(Problem::new(
            field,
            format!("is {len} characters long; the limit is {max}"),
        ));
        return false;
    }
    true
}

/// The body of an upsert (seed 001 §4 plus `priority`, `max_run_seconds`, failure handling
/// and `revision`). Numbers are `i64` so that out-of-range values reach the range checks and
/// get named.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScheduleInput {
    /// Absent: derived from `workflow_id`, `cron_expr` and `timezone` ([`derived_schedule_id`]).
    pub schedule_id: Option<String>,
    /// The workflow to launch.
    pub workflow_id: String,
    /// Its version.
    pub version: i64,
    /// The user to launch as.
    pub user_id: String,
    /// Cron expression, `@every <duration>` or `@at <RFC3339>`.
    pub cron_expr: String,
    /// IANA zone name.
    pub timezone: String,
    /// First instant a tick may fall on (inclusive).
    pub start_at: Option<DateTime<Utc>>,
    /// Last instant a tick may fall on (inclusive).
    pub end_at: Option<DateTime<Utc>>,
    /// `0..=3_600_000`; absent: the configured default.
    pub jitter_ms: Option<i64>,
    /// `allow`, `skip`, `queue`, `buffer_one` or `cancel_other`; absent: the configured
    /// default.
    pub overlap_policy: Option<String>,
    /// Under `queue`: most runs waiting, at least 1; absent: unbounded.
    pub max_queued: Option<i64>,
    /// Under an exclusive overlap policy: most runs in flight at once, `1..=1000`; absent:
    /// one. `allow` has no limit and takes none.
    pub max_in_flight: Option<i64>,
    /// `none`, `fire_immediately` or `spread`; absent: the configured default.
    pub catchup_policy: Option<String>,
    /// Higher dispatches first; absent: 0.
    pub priority: Option<i64>,
    /// Positive; absent: no limit.
    pub max_run_seconds: Option<i64>,
    /// `1..=100` attempts per run; absent: 1 (no retry).
    pub max_attempts: Option<i64>,
    /// Seconds before each next attempt (the last value repeats).
    pub retry_intervals_s: Option<Vec<i64>>,
    /// Exponential backoff between attempts (instead of intervals).
    pub retry_backoff: Option<BackoffInput>,
    /// Positive: a `STARTED` run with no report for this long is timed out.
    pub heartbeat_timeout_s: Option<i64>,
    /// An `ENQUEUED` run not started this long is re-published; 0 never; absent: the
    /// configured default.
    pub start_timeout_s: Option<i64>,
    /// When given, the write applies only if the stored revision is this one.
    pub revision: Option<i64>,
    /// Exclusions, calendars, roll and DST policy.
    pub rules: RulesInput,
    /// At least 1: after this many scheduled runs the schedule is exhausted; absent: no
    /// limit. Manual, backfill and chain runs do not count.
    pub max_runs: Option<i64>,
    /// `1..=31_536_000` seconds after its tick by which each planned run must be final;
    /// absent: no deadline.
    pub deadline_s: Option<i64>,
    /// The region its runs launch in, one of `regions.names`; absent: no region.
    pub region: Option<String>,
    /// Where its runs launch, in order, while its region's launch stream is unavailable.
    pub fallback_regions: Option<Vec<String>>,
}

/// `retry_backoff` as sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackoffInput {
    /// The first wait, seconds.
    pub initial_s: i64,
    /// Growth per attempt.
    pub multiplier: f64,
    /// The longest wait, seconds.
    pub max_s: i64,
}

/// A [`ScheduleInput`] whose every field passed its rule.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    pub schedule_id: String,
    pub workflow_id: String,
    pub version: i32,
    pub user_id: String,
    pub spec: Spec,
    pub zone: Tz,
    pub start_at: Option<DateTime<Utc>>,
    pub end_at: Option<DateTime<Utc>>,
    pub jitter_ms: u32,
    pub overlap_policy: OverlapPolicy,
    pub catchup_policy: CatchupPolicy,
    pub priority: i32,
    pub max_run_seconds: Option<i32>,
    pub max_queued: Option<i32>,
    pub max_in_flight: Option<i32>,
    pub failure: FailurePolicy,
    pub revision: Option<i64>,
    pub max_runs: Option<i32>,
    pub deadline_s: Option<i32>,
    pub region: Option<String>,
    pub fallback_regions: Vec<String>,
    pub rules: CheckedRules,
    /// The named calendars, once resolved against the store ([`Checked::resolve`]).
    pub calendars: Vec<Arc<NamedCalendar>>,
}

impl Checked {
    /// The timetable with `anchor` (the schedule's creation time) for `@every`, with its
    /// exclusions, roll and DST policy.
    pub fn timetable(&self, anchor: DateTime<Utc>) -> Timetable {
        let window = (self.start_at, self.end_at);
        self.rules
            .with(self.spec.clone(), self.zone, anchor, window)
            .timetable_with(self.calendars.clone())
    }

    /// Attaches the stored calendars it names.
    ///
    /// # Errors
    /// A problem per unknown calendar.
    pub fn resolve(&mut self, calendars: &rules::Calendars) -> Result<(), Vec<Problem>> {
        self.calendars = rules::resolve(&self.rules.stored, calendars)?;
        Ok(())
    }
}

/// The schedule id used when an upsert gives none: `<workflow_id>-<16 hex>`, the hex being
/// the start of sha256(workflow_id "\n" cron_expr "\n" timezone) with the spec trimmed. So
/// the same workflow, spec and zone always name the same schedule (a re-deploy updates it),
/// and changing the spec or zone makes a new one. The workflow part is cut so the id stays
/// within 200 characters.
pub fn derived_schedule_id(workflow_id: &str, cron_expr: &str, timezone: &str) -> String {
    let digest = Sha256::digest(format!("{workflow_id}\n{}\n{timezone}", cron_expr.trim()));
    let suffix = &hex::encode(digest)[..16];
    let keep = MAX_ID_LEN - suffix.len() - 1;
    let prefix: String = workflow_id.chars().take(keep).collect();
    format!("{prefix}-{suffix}")
}

/// Parses a schedule spec (a `cron_expr`) as every upsert and preview does. The crates above
/// the registrar (the operator page, the offline `kairos preview`) read a spec through this,
/// never through the core's parser directly, so there is one way a spec is read.
///
/// # Errors
/// The parser's [`kairos_core::SpecError`], naming the field, the value and the rule.
pub fn parse_spec(text: &str) -> Result<Spec, kairos_core::SpecError> {
    Spec::parse(text)
}

/// Checks every field of `input`; returns all problems found.
pub(crate) fn check(input: &ScheduleInput, settings: &Settings) -> Result<Checked, Vec<Problem>> {
    check_sharing(input, settings, &mut Specs::default())
}

/// Parsed specs by their text. The schedules of one deploy sync that share a spec share one
/// parsed spec: a parsed cron expression holds about 5 KiB, so 10,000 schedules parsed apart
/// held 50 MiB at the deploy's peak.
#[derive(Debug, Default)]
pub(crate) struct Specs(HashMap<String, Spec>);

impl Specs {
    fn parse(&mut self, text: &str) -> Result<Spec, kairos_core::SpecError> {
        if let Some(spec) = self.0.get(text) {
            return Ok(spec.clone());
        }
        let spec = parse_spec(text)?;
        self.0.insert(text.to_string(), spec.clone());
        Ok(spec)
    }
}

/// [`check`], parsing the spec through `specs`.
pub(crate) fn check_sharing(
    input: &ScheduleInput,
    settings: &Settings,
    specs: &mut Specs,
) -> Result<Checked, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut id = |field: &'static str, value: &str| {
        if let Err(err) = validate_id(field, value) {
            problems.push(Problem::new(field, err.to_string()));
        }
    };
    id("workflow_id", &input.workflow_id);
    id("user_id", &input.user_id);
    if let Some(schedule_id) = &input.schedule_id {
        id("schedule_id", schedule_id);
        if schedule_id == kairos_store::dispatch::API_SCHEDULE_ID {
            problems.push(Problem::new(
                "schedule_id",
                format!(
                    "{schedule_id:?} is reserved for runs started through POST /run-launcher/start"
                ),
            ));
        }
        if RESERVED_SCHEDULE_IDS.contains(&schedule_id.as_str()) {
            problems.push(Problem::new(
                "schedule_id",
                format!(
                    "{schedule_id:?} is reserved: it names a route under /schedules/ \
                     (reserved: {})",
                    RESERVED_SCHEDULE_IDS.join(", ")
                ),
            ));
        }
    }
    let spec = within(
        &mut problems,
        "cron_expr",
        &input.cron_expr,
        MAX_CRON_EXPR_LEN,
    )
    .then(|| specs.parse(&input.cron_expr))
    .and_then(|parsed| {
        parsed
            .map_err(|err| problems.push(Problem::new("cron_expr", err.to_string())))
            .ok()
    });
    let zone = within(&mut problems, "timezone", &input.timezone, MAX_TIMEZONE_LEN)
        .then(|| check_zone(&input.timezone, settings))
        .and_then(|zone| zone.map_err(|p| problems.push(p)).ok());
    for (field, value) in [
        ("overlap_policy", &input.overlap_policy),
        ("catchup_policy", &input.catchup_policy),
    ] {
        if let Some(value) = value {
            within(&mut problems, field, value, MAX_POLICY_LEN);
        }
    }
    if let (Some(start), Some(end)) = (input.start_at, input.end_at) {
        if end < start {
            problems.push(Problem::new(
                "end_at",
                format!("{} is before start_at {}", rfc3339(end), rfc3339(start)),
            ));
        }
    }
    let version = ranged(
        &mut problems,
        "version",
        Some(input.version),
        0,
        i32::MAX.into(),
    );
    let jitter = ranged(
        &mut problems,
        "jitter_ms",
        input.jitter_ms,
        0,
        MAX_JITTER_MS.into(),
    );
    let priority = ranged(
        &mut problems,
        "priority",
        input.priority,
        i32::MIN.into(),
        i32::MAX.into(),
    );
    let max_run = ranged(
        &mut problems,
        "max_run_seconds",
        input.max_run_seconds,
        1,
        i32::MAX.into(),
    );
    let max_queued = ranged(
        &mut problems,
        "max_queued",
        input.max_queued,
        1,
        i32::MAX.into(),
    );
    let max_in_flight = ranged(
        &mut problems,
        "max_in_flight",
        input.max_in_flight,
        1,
        MAX_IN_FLIGHT,
    );
    let max_runs = ranged(
        &mut problems,
        "max_runs",
        input.max_runs,
        1,
        i32::MAX.into(),
    );
    let deadline_s = ranged(
        &mut problems,
        "deadline_s",
        input.deadline_s,
        1,
        MAX_DEADLINE_S.into(),
    );
    let failure = failure_policy(&mut problems, input);
    // A name over the bound was refused above and is not echoed again.
    fn short(value: &Option<String>) -> Option<&str> {
        value
            .as_deref()
            .filter(|name| name.chars().count() <= MAX_POLICY_LEN)
    }
    let overlap: Option<OverlapPolicy> = policy(&mut problems, short(&input.overlap_policy));
    let catchup: Option<CatchupPolicy> = policy(&mut problems, short(&input.catchup_policy));
    let effective = overlap.unwrap_or(settings.default_overlap);
    // An unknown policy name is named above; the bound is checked against a known one.
    let known = overlap.is_some() || input.overlap_policy.is_none();
    if max_queued.is_some() && known && effective != OverlapPolicy::Queue {
        problems.push(Problem::new(
            "max_queued",
            format!("applies only to overlap_policy queue, not {effective}"),
        ));
    }
    if max_in_flight.is_some() && known && effective == OverlapPolicy::Allow {
        problems.push(Problem::new(
            "max_in_flight",
            "applies only to an exclusive overlap_policy (skip, queue, buffer_one, \
             cancel_other); allow has no limit",
        ));
    }
    if let Some(revision) = input.revision {
        if revision < 1 {
            problems.push(Problem::new("revision", "must be 1 or more"));
        }
    }
    let rules = rules::check(&input.rules, spec.as_ref(), &mut problems);
    let (region, fallback_regions) = crate::regions::check(
        input.region.as_deref(),
        input.fallback_regions.as_deref(),
        &settings.regions,
        &mut problems,
    );
    match (spec, zone) {
        (Some(spec), Some(zone)) if problems.is_empty() => Ok(Checked {
            schedule_id: input.schedule_id.clone().unwrap_or_else(|| {
                derived_schedule_id(&input.workflow_id, &input.cron_expr, &input.timezone)
            }),
            workflow_id: input.workflow_id.clone(),
            version: version.map_or(0, narrow),
            user_id: input.user_id.clone(),
            spec,
            zone,
            start_at: input.start_at.map(as_stored),
            end_at: input.end_at.map(as_stored),
            jitter_ms: jitter.map_or(settings.default_jitter_ms, |j| narrow(j) as u32),
            overlap_policy: overlap.unwrap_or(settings.default_overlap),
            catchup_policy: catchup.unwrap_or(settings.default_catchup),
            priority: priority.map_or(0, narrow),
            max_run_seconds: max_run.map(narrow),
            max_queued: max_queued.map(narrow),
            max_in_flight: max_in_flight.map(narrow),
            failure: failure.unwrap_or_default(),
            revision: input.revision,
            max_runs: max_runs.map(narrow),
            deadline_s: deadline_s.map(narrow),
            region,
            fallback_regions,
            rules,
            calendars: Vec::new(),
        }),
        _ => Err(problems),
    }
}

/// The retry policy and heartbeat timeout, checked by the core's rules.
fn failure_policy(problems: &mut Vec<Problem>, input: &ScheduleInput) -> Option<FailurePolicy> {
    let seconds = |value: i64| u32::try_from(value).unwrap_or(u32::MAX);
    let wait = match (&input.retry_intervals_s, &input.retry_backoff) {
        (Some(_), Some(_)) => {
            problems.push(Problem::new(
                "retry_intervals_s",
                "give either retry_intervals_s or retry_backoff, not both",
            ));
            return None;
        }
        (Some(intervals), None) => {
            if intervals.iter().any(|s| *s <= 0) {
                problems.push(Problem::new(
                    "retry_intervals_s",
                    "every interval must be a positive number of seconds",
                ));
                return None;
            }
            Some(RetryWait::Intervals(
                intervals.iter().map(|s| seconds(*s)).collect(),
            ))
        }
        (None, Some(backoff)) => Some(RetryWait::Backoff {
            initial_s: u32::try_from(backoff.initial_s).unwrap_or(0),
            multiplier: backoff.multiplier,
            max_s: u32::try_from(backoff.max_s).unwrap_or(0),
        }),
        (None, None) => None,
    };
    let heartbeat = ranged(
        problems,
        "heartbeat_timeout_s",
        input.heartbeat_timeout_s,
        1,
        i32::MAX.into(),
    );
    let start_timeout = ranged(
        problems,
        "start_timeout_s",
        input.start_timeout_s,
        0,
        i32::MAX.into(),
    );
    match RetryPolicy::new(input.max_attempts.unwrap_or(1), wait) {
        Ok(policy) => Some(FailurePolicy::of(
            &policy,
            heartbeat.map(seconds),
            start_timeout.map(seconds),
        )),
        Err(found) => {
            problems.extend(found);
            None
        }
    }
}

/// Checks the zone against the tz database and the allow-list.
pub(crate) fn check_zone(name: &str, settings: &Settings) -> Result<Tz, Problem> {
    let zone = parse_zone(name).map_err(|err| Problem::new("timezone", err.to_string()))?;
    match &settings.allowed_zones {
        Some(allowed) if !allowed.iter().any(|z| z == name) => Err(Problem::new(
            "timezone",
            format!("{name:?} is not in the configured allow-list of zones"),
        )),
        _ => Ok(zone),
    }
}

fn ranged(
    problems: &mut Vec<Problem>,
    field: &'static str,
    value: Option<i64>,
    min: i64,
    max: i64,
) -> Option<i64> {
    let value = value?;
    if (min..=max).contains(&value) {
        Some(value)
    } else {
        problems.push(Problem::new(
            field,
            format!("{value} is out of range: must be between {min} and {max}"),
        ));
        None
    }
}

fn policy<P: std::str::FromStr<Err = kairos_core::PolicyError>>(
    problems: &mut Vec<Problem>,
    value: Option<&str>,
) -> Option<P> {
    match value?.parse() {
        Ok(policy) => Some(policy),
        Err(err) => {
            problems.push(Problem::new(err.field, err.to_string()));
            None
        }
    }
}

/// Narrows a value already checked to fit in `i32`.
fn narrow(value: i64) -> i32 {
    i32::try_from(value).expect("range-checked before narrowing")
}

/// The first tick at or after `now`, checked against "never fires" and, with the exact
/// smallest gap the spec can leave between two ticks ([`Timetable::min_gap`]), against
/// `min_interval`.
///
/// DST: the gap compared is the wall-clock one. A transition can shorten one real gap by
/// the size of the transition (e.g. `0 1,3 * * *` is one real hour apart the day New York
/// springs forward); `min_interval` bounds how often a spec fires, and counting those
/// one-off shortenings would accept or refuse the same spec depending on its zone.
pub(crate) fn first_tick(
    timetable: &Timetable,
    now: DateTime<Utc>,
    settings: &Settings,
) -> Result<DateTime<Utc>, Problem> {
    if let Some(problem) = rules::exclusion_problem(timetable, now) {
        return Err(problem);
    }
    let Some(first) = timetable.first_at_or_after(now) else {
        return Err(never_fires(timetable, now));
    };
    // The exact gap is searched for only when the bound alone cannot clear the limit.
    if timetable
        .min_gap_floor()
        .is_none_or(|floor| floor >= settings.min_interval)
    {
        return Ok(first);
    }
    match timetable.min_gap(first) {
        Some(closest) if closest.gap < settings.min_interval => Err(Problem::new(
            "cron_expr",
            format!(
                "{:?} fires {}s apart ({} and {}, {} wall time), more often than \
                 min_interval {}s",
                timetable.spec().as_str(),
                closest.gap.num_seconds(),
                closest.earlier.format("%Y-%m-%dT%H:%M:%S"),
                closest.later.format("%Y-%m-%dT%H:%M:%S"),
                timetable.zone().name(),
                settings.min_interval.num_seconds(),
            ),
        )),
        _ => Ok(first),
    }
}

fn never_fires(timetable: &Timetable, now: DateTime<Utc>) -> Problem {
    Problem::new(
        "cron_expr",
        format!(
            "{:?} never fires at or after {} within the schedule's window (start_at/end_at) \
             and before 2200",
            timetable.spec().as_str(),
            rfc3339(now),
        ),
    )
}

/// An instant as the database keeps it: whole microseconds (the bound value is truncated to
/// them), so a timestamp written with more digits compares equal to its stored self and an
/// identical upsert changes nothing.
fn as_stored(at: DateTime<Utc>) -> DateTime<Utc> {
    chrono::SubsecRound::trunc_subsecs(at, 6)
}
