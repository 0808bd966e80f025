//! One schedule (`/ui/schedules/{id}`): the spec in words, why the last tick did not launch,
//! "paused until …, by …, because …", (for a deployer) the pause (with an optional until, in
//! UTC), trigger, backfill and delete controls, then three tabs: the next ten fire times
//! (`upcoming.rs`: DST rules, jitter, skips and the skip controls), the last day and the runs
//! (cancel, retry); every field; and the history of changes (who changed what, and why).

use chrono::{DateTime, Duration, DurationRound, Utc};
use kairos_registrar::{Registrar, Schedule, ScheduleDetail};
use maud::{html, Markup};

use crate::actions::role_note;
use crate::chart::last_day;
use crate::history::history_table;
use crate::links::run_href;
use crate::params::Params;
use crate::runs::run_table;
use crate::tabs::{tablist, tabpanel, Tab};
use crate::text::words;
use crate::time::{in_zone, relative, rfc3339, utc, zoned};
use crate::upcoming::upcoming;
use crate::words::describe;
use crate::Viewer;

/// Upcoming ticks shown.
const UPCOMING: usize = 10;
/// Runs shown, newest first.
const RUNS: i64 = 50;
/// Runs read for the charts of the last day (the most the registrar gives).
const CHART_RUNS: i64 = kairos_registrar::LIST_LIMIT_MAX;
/// Changes shown in the History section, newest first.
const HISTORY: i64 = 50;
/// Ticks of a backfill plan listed (the total is always given).
const PLAN_SHOWN: usize = 50;

/// The fragment of schedule `id`; no query parameters.
///
/// # Errors
/// [`kairos_registrar::Error::NotFound`], `Invalid` for a bad id or parameter; a store error.
pub async fn schedule(
    registrar: &Registrar,
    id: &str,
    params: Params,
    viewer: Viewer,
) -> Result<String, kairos_registrar::Error> {
    params.finish()?;
    let detail = registrar.schedule_detail(id, UPCOMING).await?;
    // The newest runs: the table shows a page, the charts the last day of them.
    let mut runs = registrar.runs(id, None, None, CHART_RUNS).await?.runs;
    let complete = i64::try_from(runs.len()).unwrap_or(i64::MAX) < CHART_RUNS;
    let charts = last_day(&runs, detail.now, complete);
    runs.truncate(usize::try_from(RUNS).unwrap_or(50));
    let history = registrar.schedule_history(id, None, HISTORY).await?.entries;
    // Ticks planned ahead (not yet due) apart from the runs that have fired.
    let (ahead, fired): (Vec<_>, Vec<_>) =
        runs.into_iter().partition(|run| run.fire_at > detail.now);
    let s = &detail.schedule;
    let markup = html! {
        p.crumbs { a href="/ui" { "← Schedules" } }
        h1 { "Schedule " span #schedule-id { (s.schedule_id) }
            @if s.paused { " " span.badge.paused #paused-badge { "paused" } } }
        @if s.paused { (pause_line(s)) }
        (role_note(viewer))
        p.words #spec-words { "Fires " (describe(&s.cron_expr, &s.timezone)) "." }
        @if let Some(why) = detail.stats.why() {
            p.why #why role="note" { strong { "Why the last tick did not launch: " } (why) }
        }
        @if viewer.can_write { (actions(s, detail.now)) }
        (tablist("Schedule views", &[
            Tab { panel: "overview", title: "Fire times and runs" },
            Tab { panel: "all-fields", title: "All fields" },
            Tab { panel: "history", title: "History" },
        ]))
        (tabpanel("overview", true, html! {
            section aria-labelledby="upcoming-title" {
                h2 #upcoming-title { "Next " (detail.upcoming.len()) " fire times" }
                (upcoming(&detail, viewer))
            }
            section aria-labelledby="day-title" {
                h2 #day-title { "The last day" }
                (charts)
            }
            section aria-labelledby="runs-title" {
                h2 #runs-title { "Runs, newest first" }
                (run_table(&fired, detail.now, Some(&s.timezone), viewer, false))
            }
            @if !ahead.is_empty() {
                section aria-labelledby="planned-title" {
                    h2 #planned-title { "Planned ahead, not yet due" }
                    ul.planned #planned-runs {
                        @for run in ahead.iter().rev() {
                            li data-key=(run.idempotency_key) {
                                a.run-link href=(run_href(&run.idempotency_key)) { (zoned(run.run_at, &s.timezone)) }
                                " " span class=(format!("status status-{}", run.status.as_str().to_lowercase())) { (run.status.as_str()) }
                                " " small.muted { (relative(run.fire_at, detail.now)) }
                            }
                        }
                    }
                }
            }
        }))
        (tabpanel("all-fields", false, html! {
            h2 #fields-title { "All fields" }
            (fields(&detail))
        }))
        (tabpanel("history", false, html! {
            h2 #history-title { "History, newest first" }
            (history_table(&history, detail.now))
        }))
    };
    Ok(markup.into_string())
}

/// The deployer's controls. The time fields' placeholders are RFC 3339 times in UTC near
/// `now` (the next hour for the pause's until, the last day for a backfill), so that an
/// example can be edited rather than written from nothing.
fn actions(s: &Schedule, now: DateTime<Utc>) -> Markup {
    let hour = now.duration_trunc(Duration::hours(1)).unwrap_or(now);
    let (next_hour, day_ago) = (hour + Duration::hours(1), hour - Duration::days(1));
    html! {
        section.actions #actions aria-label="Actions" {
            form.action #pause-form data-schedule=(s.schedule_id) data-paused=(s.paused) {
                div.field {
                    label for="pause-note" { @if s.paused { "Resume note (optional)" } @else { "Pause note (optional)" } }
                    input #pause-note name="note" maxlength="1000" placeholder="why";
                }
                @if !s.paused {
                    div.field {
                        label for="pause-until" { "Until (UTC, optional)" }
                        input #pause-until name="until" autocomplete="off" placeholder=(rfc3339(next_hour))
                            aria-describedby="pause-until-hint";
                        small.muted #pause-until-hint { "A UTC date and time; the schedule resumes by itself then." }
                    }
                }
                button #pause-button type="submit" { @if s.paused { "Resume" } @else { "Pause" } }
            }
            form.action #trigger-form data-schedule=(s.schedule_id) {
                button #trigger-button type="submit" { "Trigger now" }
            }
            form.action #backfill-form data-schedule=(s.schedule_id) {
                div.field {
                    label for="backfill-from" { "Backfill from (UTC, RFC 3339)" }
                    input #backfill-from name="from" placeholder=(rfc3339(day_ago)) required;
                }
                div.field {
                    label for="backfill-to" { "to (UTC, RFC 3339)" }
                    input #backfill-to name="to" placeholder=(rfc3339(hour)) required;
                }
                button #backfill-preview type="submit" { "Show ticks" }
            }
            div #backfill-plan aria-live="polite" {}
            div.danger {
                button.delete #delete-button type="button" data-schedule=(s.schedule_id) { "Delete schedule…" }
                form.action #delete-form data-schedule=(s.schedule_id) hidden {
                    p { "Delete schedule " code { (s.schedule_id) } "? Its runs not yet published are cancelled; its run history stays. This cannot be undone." }
                    button #delete-confirm type="submit" { "Delete " (s.schedule_id) }
                    button #delete-dismiss type="button" { "Keep it" }
                }
            }
        }
    }
}

/// "Paused until …, by …, because …": each part only when it is known.
fn pause_line(s: &Schedule) -> Markup {
    let zone = &s.timezone;
    html! {
        p.pause-note #pause-note-text {
            "Paused"
            @if let Some(until) = s.paused_until {
                " until " time #paused-until datetime=(rfc3339(until)) { (zoned(until, zone)) }
                // The pause form takes until in UTC: say it in UTC too (once).
                @if in_zone(until, zone) != utc(until) { " = " span #paused-until-utc { (utc(until)) } }
            }
            @if let Some(by) = s.paused_by.as_deref() { ", by " span #paused-by { (by) } }
            @if let Some(note) = s.pause_note.as_deref() { ", because " span #pause-because { (words(note)) } }
            "."
        }
    }
}

/// The fields whose value is one id, spec, zone or time, shown on one line (the field
/// scrolls sideways when it is too wide).
const WHOLE: [&str; 11] = [
    "Workflow",
    "User",
    "Spec",
    "Time zone",
    "Start at",
    "End at",
    "Next tick to plan",
    "Paused until",
    "Paused by",
    "Created",
    "Updated",
];

/// Where the schedule's runs launch: its region and, in order, its fallbacks.
fn region_text(s: &Schedule) -> String {
    match (&s.region, s.fallback_regions.is_empty()) {
        (None, _) => "none (the launch stream without a region)".to_string(),
        (Some(region), true) => format!("{region}, no fallback (its runs wait for it)"),
        (Some(region), false) => {
            format!("{region}, then {}", s.fallback_regions.join(", "))
        }
    }
}

fn fields(detail: &ScheduleDetail) -> Markup {
    let s = &detail.schedule;
    let z = &s.timezone;
    let opt = |at: Option<DateTime<Utc>>| at.map_or_else(|| "—".to_string(), |at| in_zone(at, z));
    let r = &s.rules;
    let f = &s.failure;
    let rows: Vec<(&str, String)> = vec![
        (
            "Workflow",
            format!("{} version {}", s.workflow_id, s.version),
        ),
        ("User", s.user_id.clone()),
        ("Spec", s.cron_expr.clone()),
        ("Time zone", s.timezone.clone()),
        ("Start at", opt(s.start_at)),
        ("End at", opt(s.end_at)),
        ("Next tick to plan", opt(s.next_run_at)),
        ("Paused", s.paused.to_string()),
        ("Pause note", s.pause_note.clone().unwrap_or_default()),
        ("Paused until", opt(s.paused_until)),
        ("Paused by", s.paused_by.clone().unwrap_or_default()),
        (
            "Runs left",
            s.remaining_runs()
                .map_or_else(|| "no limit".to_string(), |n| n.to_string()),
        ),
        ("Jitter", format!("±{} ms", s.jitter_ms)),
        ("Overlap policy", s.overlap_policy.to_string()),
        ("Runs in flight at most", in_flight_limit(s)),
        ("Catch-up policy", s.catchup_policy.to_string()),
        ("Priority", s.priority.to_string()),
        (
            "Max run seconds",
            s.max_run_seconds.map_or("—".into(), |v| v.to_string()),
        ),
        (
            "Deadline (s after the tick)",
            s.deadline_s.map_or("—".into(), |v| v.to_string()),
        ),
        ("Region", region_text(s)),
        ("Max attempts", f.max_attempts.to_string()),
        (
            "Retry intervals (s)",
            debug_or_dash(f.retry_intervals_s.as_ref()),
        ),
        (
            "Heartbeat timeout (s)",
            debug_or_dash(f.heartbeat_timeout_s.as_ref()),
        ),
        (
            "Start timeout (s)",
            debug_or_dash(f.start_timeout_s.as_ref()),
        ),
        ("Exclude", format!("{:?}", r.exclude)),
        ("Exclude calendars", format!("{:?}", r.exclude_calendars)),
        ("Roll", r.roll.to_string()),
        (
            "DST gap",
            r.dst_gap.map_or("default".into(), |v| v.to_string()),
        ),
        (
            "DST fold",
            r.dst_fold.map_or("default".into(), |v| v.to_string()),
        ),
        ("Missed ticks", detail.stats.missed_ticks.to_string()),
        (
            "Skipped ticks (recent runs)",
            detail.stats.skipped_ticks.to_string(),
        ),
        ("Revision", s.revision.to_string()),
        ("Created", in_zone(s.created_at, z)),
        ("Updated", in_zone(s.updated_at, z)),
    ];
    html! {
        dl.fields #fields { @for (name, value) in rows { dt { (name) } dd class=[WHOLE.contains(&name).then_some("token")] {
            @if name == "Workflow" {
                a.workflow-link href=(crate::links::workflow_href(&s.workflow_id, Some(s.version))) { (value) }
            } @else if WHOLE.contains(&name) { (value) } @else { (words(&value)) }
        } } }
    }
}

fn debug_or_dash<T: std::fmt::Debug>(value: Option<&T>) -> String {
    value.map_or_else(|| "—".to_string(), |v| format!("{v:?}"))
}

/// The ticks a backfill of `[from, to]` would create, with the button that creates them.
///
/// # Errors
/// `Invalid` for a missing or bad `from`/`to`; `NotFound`; a store error.
pub async fn backfill_plan(
    registrar: &Registrar,
    id: &str,
    params: Params,
    viewer: Viewer,
) -> Result<String, kairos_registrar::Error> {
    let mut params = params;
    let from = params.time("from");
    let to = params.time("to");
    for (name, value) in [("from", from.is_none()), ("to", to.is_none())] {
        if value {
            params.problem(kairos_registrar::Problem::new(name, "is required"));
        }
    }
    params.finish()?;
    let (Some(from), Some(to)) = (from, to) else {
        unreachable!("both are present when there is no problem");
    };
    let detail = registrar.schedule_detail(id, 0).await?;
    let plan = registrar.backfill_plan(id, from, to, PLAN_SHOWN).await?;
    let zone = &detail.schedule.timezone;
    let markup = html! {
        div.plan #plan data-total=(plan.total) {
            p { "From " span.nowrap { (utc(from)) } " to " span.nowrap { (utc(to)) } ": " strong { (plan.total) " tick" @if plan.total != 1 { "s" } }
                " (ticks that already have a run are left alone)." }
            @if !plan.ticks.is_empty() {
                ol.ticks { @for tick in &plan.ticks { li { (zoned(*tick, zone)) " · " span.nowrap { (utc(*tick)) } } } }
                @if plan.total > plan.ticks.len() { p.muted { "… and " (plan.total - plan.ticks.len()) " more." } }
            }
            @if viewer.can_write && plan.total > 0 {
                button #backfill-confirm type="button" data-schedule=(id) data-from=(rfc3339(from)) data-to=(rfc3339(to)) {
                    "Create runs for these " (plan.total) " ticks"
                }
            }
        }
    };
    Ok(markup.into_string())
}

/// The schedule's limit on runs in flight, in words.
fn in_flight_limit(s: &Schedule) -> String {
    match (s.overlap_policy, s.max_in_flight) {
        (kairos_core::OverlapPolicy::Allow, _) => "no limit (overlap allow)".to_string(),
        (_, Some(n)) => n.to_string(),
        (_, None) => "1".to_string(),
    }
}
