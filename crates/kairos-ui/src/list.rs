//! The schedules list (`/ui`): each schedule with its next fire time in its zone and in UTC,
//! paused state, last outcome and skipped and missed counts; a search box, filters and cursor
//! paging over `GET /schedules`' keyset listing (primary key order, so a page costs the same
//! at any depth of a million schedules).
//!
//! Above the table, the charts of the last day across all schedules (outcomes and fire drift
//! per hour), from totals the caller reads and may cache.
//!
//! The search box (`q`) matches a case-insensitive substring of the schedule, workflow or
//! user id; the workflow and user filters match a case-insensitive substring of their own
//! field (`workflow_id=dem` finds workflow `demo`), unlike `GET /schedules`' exact filters.

use chrono::{DateTime, Utc};
use kairos_registrar::{HourTotals, ListFilter, Registrar, ScheduleRow};
use maud::{html, Markup};

use crate::actions::role_note;
use crate::params::Params;
use crate::text::words;
use crate::time::{is_utc, relative, rfc3339, utc, zoned};
use crate::Viewer;

/// Rows per page.
const PAGE_SIZE: i64 = 50;

/// The schedules fragment for the query `params` (`q`, `workflow_id`, `user_id`, `paused`,
/// `cursor`); `q`, `workflow_id` and `user_id` match substrings, ignoring case. `day` is the
/// last day across all schedules per hour as read at `day_at`, at most `day_max_age_s` old
/// (the charts above the table).
///
/// # Errors
/// [`kairos_registrar::Error::Invalid`] for a bad parameter; a store error.
pub async fn schedules(
    registrar: &Registrar,
    params: Params,
    viewer: Viewer,
    day: &[HourTotals],
    day_at: DateTime<Utc>,
    day_max_age_s: u64,
) -> Result<String, kairos_registrar::Error> {
    let mut params = params;
    let filter = ListFilter {
        q: params.text("q"),
        workflow_contains: params.text("workflow_id"),
        user_contains: params.text("user_id"),
        paused: params.boolean("paused"),
        after: params.text("cursor"),
        limit: PAGE_SIZE,
        ..ListFilter::default()
    };
    params.finish()?;
    let page = registrar.schedule_rows(&filter).await?;
    let next = page
        .next_cursor
        .as_deref()
        .map(|cursor| page_link(&filter, cursor));
    let markup = html! {
        h1 { "Schedules" }
        (role_note(viewer))
        (filters(&filter))
        (crate::chart::overview(day, day_at, day_max_age_s))
        @if page.rows.is_empty() {
            p.empty { "No schedule matches." }
        } @else {
            div.table-wrap {
                table.schedules {
                    caption.visually-hidden { "Schedules, next fire time in the schedule's zone and in UTC" }
                    thead { tr {
                        th scope="col" { "Schedule" }
                        th scope="col" { "Workflow" }
                        th scope="col" { "Spec" }
                        th scope="col" { "Next fire" }
                        th scope="col" { "Paused" }
                        th scope="col" { "Last outcome" }
                        th scope="col" { "Skipped (last " (kairos_registrar::LIST_STATS_WINDOW) " runs) / missed" }
                    } }
                    tbody {
                        @for row in &page.rows { (schedule_row(row, page.now)) }
                    }
                }
            }
        }
        nav.pager aria-label="Pages" {
            @if filter.after.is_some() {
                a href=(first_link(&filter)) { "← First page" }
            }
            @if let Some(next) = next {
                a #next-page href=(next) { "Next page →" }
            }
        }
    };
    Ok(markup.into_string())
}

fn schedule_row(row: &ScheduleRow, now: chrono::DateTime<chrono::Utc>) -> Markup {
    let s = &row.schedule;
    let last = row.stats.last_fire.as_ref();
    html! {
        tr data-schedule=(s.schedule_id) {
            td data-label="Schedule" {
                a.schedule-link href=(format!("/ui/schedules/{}", s.schedule_id)) { (s.schedule_id) }
            }
            td data-label="Workflow" {
                a.workflow-link href=(crate::links::workflow_href(&s.workflow_id, Some(s.version))) { (s.workflow_id) " v" (s.version) }
                br; small.muted { "user " (s.user_id) } }
            td data-label="Spec" { code { (s.cron_expr) } br; small.muted { (s.timezone) } }
            td.next-fire.wrap data-label="Next fire" {
                @match row.next_fire {
                    Some(at) => {
                        time datetime=(rfc3339(at)) { (zoned(at, &s.timezone)) }
                        br; small {
                            @if !is_utc(&s.timezone) { span.nowrap { (utc(at)) } " · " }
                            span.nowrap { (relative(at, now)) }
                        }
                    }
                    None => { span.muted { "none (exhausted or not plannable)" } }
                }
            }
            td.wrap data-label="Paused" {
                @if s.paused { span.badge.paused { "paused" } } @else { span.muted { "no" } }
                @if let Some(note) = s.pause_note.as_deref().filter(|_| s.paused) {
                    br; small.pause-note { (words(note)) }
                }
            }
            td.wrap data-label="Last outcome" {
                @match last {
                    Some(run) => {
                        span class=(format!("status status-{}", run.status.as_str().to_lowercase())) { (run.status.as_str()) }
                        br; small { (zoned(run.run_at, &s.timezone)) }
                    }
                    None => { span.muted { "never launched" } }
                }
            }
            td data-label="Skipped / missed" {
                (row.stats.skipped_ticks) " / " (row.stats.missed_ticks)
            }
        }
    }
}

fn filters(filter: &ListFilter) -> Markup {
    let paused = filter.paused.map(|p| p.to_string()).unwrap_or_default();
    html! {
        form.filters #schedule-filters method="get" action="/ui" role="search" {
            div.field.search {
                label for="f-q" { "Search" }
                input #f-q type="search" name="q" placeholder="schedule, workflow or user id"
                    value=(filter.q.clone().unwrap_or_default());
            }
            div.field {
                label for="f-workflow" { "Workflow contains" }
                input #f-workflow name="workflow_id" value=(filter.workflow_contains.clone().unwrap_or_default());
            }
            div.field {
                label for="f-user" { "User contains" }
                input #f-user name="user_id" value=(filter.user_contains.clone().unwrap_or_default());
            }
            div.field {
                label for="f-paused" { "Paused" }
                select #f-paused name="paused" {
                    option value="" selected[paused.is_empty()] { "any" }
                    option value="true" selected[paused == "true"] { "paused" }
                    option value="false" selected[paused == "false"] { "not paused" }
                }
            }
            button type="submit" { "Filter" }
        }
    }
}

fn query(filter: &ListFilter, cursor: Option<&str>) -> String {
    let mut parts = Vec::new();
    if let Some(q) = &filter.q {
        parts.push(format!("q={}", encode(q)));
    }
    if let Some(w) = &filter.workflow_contains {
        parts.push(format!("workflow_id={}", encode(w)));
    }
    if let Some(u) = &filter.user_contains {
        parts.push(format!("user_id={}", encode(u)));
    }
    if let Some(p) = filter.paused {
        parts.push(format!("paused={p}"));
    }
    if let Some(c) = cursor {
        parts.push(format!("cursor={}", encode(c)));
    }
    if parts.is_empty() {
        "/ui".to_string()
    } else {
        format!("/ui?{}", parts.join("&"))
    }
}

fn page_link(filter: &ListFilter, cursor: &str) -> String {
    query(filter, Some(cursor))
}

fn first_link(filter: &ListFilter) -> String {
    query(filter, None)
}

/// `text` as a query string value: every byte but the unreserved ones percent-encoded.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
