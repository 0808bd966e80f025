//! The fields of a schedule and of a calendar as a change lists them, and the ones that
//! differ between two stored values.

use crate::{Calendar, FailurePolicy, Schedule};

use super::{FieldChange, FieldValue};

/// The fields that differ between `old` and `new` (`None`: the schedule did not exist
/// before, or does not after). Bookkeeping the store keeps for itself (`next_run_at`,
/// `revision`, `scheduled_runs`, `created_at`, `updated_at`) is not listed.
pub fn schedule_fields(old: Option<&Schedule>, new: Option<&Schedule>) -> Vec<FieldChange> {
    differ(old.map(described), new.map(described))
}

/// The fields that differ between two states of a calendar (`description`, `dates`).
pub fn calendar_fields(old: Option<&Calendar>, new: Option<&Calendar>) -> Vec<FieldChange> {
    let describe = |calendar: &Calendar| {
        let dates: Vec<String> = calendar.dates.iter().map(|d| d.to_string()).collect();
        vec![
            (
                "description",
                FieldValue::from(calendar.description.as_str()),
            ),
            ("dates", FieldValue::from(dates)),
        ]
    };
    differ(old.map(describe), new.map(describe))
}

/// Pairs two descriptions field by field and keeps the fields whose value differs.
fn differ(
    old: Option<Vec<(&'static str, FieldValue)>>,
    new: Option<Vec<(&'static str, FieldValue)>>,
) -> Vec<FieldChange> {
    let names: Vec<&'static str> = old
        .as_ref()
        .or(new.as_ref())
        .map(|fields| fields.iter().map(|(name, _)| *name).collect())
        .unwrap_or_default();
    let value = |fields: &Option<Vec<(&'static str, FieldValue)>>, index: usize| {
        fields
            .as_ref()
            .map_or(FieldValue::Null, |fields| fields[index].1.clone())
    };
    names
        .into_iter()
        .enumerate()
        .filter_map(|(index, name)| {
            let (old, new) = (value(&old, index), value(&new, index));
            (old != new).then(|| FieldChange::new(name, old, new))
        })
        .collect()
}

/// Every field of a schedule a caller sets, by its API name, in the API's order.
fn described(schedule: &Schedule) -> Vec<(&'static str, FieldValue)> {
    // Invariant: every field is named here, so that a new field of `Schedule` does not
    // compile until it is listed (or deliberately left out) and no change goes unrecorded.
    let Schedule {
        schedule_id: _,
        workflow_id,
        version,
        user_id,
        cron_expr,
        timezone,
        start_at,
        end_at,
        next_run_at: _,
        paused,
        jitter_ms,
        overlap_policy,
        catchup_policy,
        priority,
        max_run_seconds,
        max_queued,
        max_in_flight,
        deadline_s,
        region,
        fallback_regions,
        failure,
        rules,
        max_runs,
        scheduled_runs: _,
        pause_note,
        paused_until,
        paused_by: _,
        revision: _,
        created_at: _,
        updated_at: _,
    } = schedule;
    let FailurePolicy {
        max_attempts,
        retry_intervals_s,
        retry_backoff_initial_s,
        retry_backoff_multiplier,
        retry_backoff_max_s,
        heartbeat_timeout_s,
        start_timeout_s,
    } = failure;
    vec![
        ("workflow_id", workflow_id.as_str().into()),
        ("version", (*version).into()),
        ("user_id", user_id.as_str().into()),
        ("cron_expr", cron_expr.as_str().into()),
        ("timezone", timezone.as_str().into()),
        ("start_at", FieldValue::of(*start_at)),
        ("end_at", FieldValue::of(*end_at)),
        ("paused", (*paused).into()),
        ("pause_note", FieldValue::of(pause_note.clone())),
        ("paused_until", FieldValue::of(*paused_until)),
        ("jitter_ms", (*jitter_ms).into()),
        ("overlap_policy", overlap_policy.as_str().into()),
        ("catchup_policy", catchup_policy.as_str().into()),
        ("priority", (*priority).into()),
        ("max_run_seconds", FieldValue::of(*max_run_seconds)),
        ("max_queued", FieldValue::of(*max_queued)),
        ("max_in_flight", FieldValue::of(*max_in_flight)),
        ("deadline_s", FieldValue::of(*deadline_s)),
        ("max_attempts", (*max_attempts).into()),
        (
            "retry_intervals_s",
            FieldValue::of(retry_intervals_s.clone()),
        ),
        (
            "retry_backoff_initial_s",
            FieldValue::of(*retry_backoff_initial_s),
        ),
        (
            "retry_backoff_multiplier",
            FieldValue::of(*retry_backoff_multiplier),
        ),
        ("retry_backoff_max_s", FieldValue::of(*retry_backoff_max_s)),
        ("heartbeat_timeout_s", FieldValue::of(*heartbeat_timeout_s)),
        ("start_timeout_s", FieldValue::of(*start_timeout_s)),
        ("exclude", rules.exclude.clone().into()),
        ("exclude_calendars", rules.exclude_calendars.clone().into()),
        ("roll", rules.roll.as_str().into()),
        (
            "dst_gap",
            FieldValue::of(rules.dst_gap.map(|gap| gap.as_str())),
        ),
        (
            "dst_fold",
            FieldValue::of(rules.dst_fold.map(|fold| fold.as_str())),
        ),
        ("max_runs", FieldValue::of(*max_runs)),
        ("region", FieldValue::of(region.clone())),
        ("fallback_regions", fallback_regions.clone().into()),
    ]
}
