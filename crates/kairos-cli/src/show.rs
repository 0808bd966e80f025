//! Text renderings of API answers for the admin verbs: one thing as one field per line
//! (nested objects flattened to `stats.why`, lists of objects to `schedules[0].revision`),
//! a listing as a table of the columns an operator scans (`--json` has the rest), so the CLI
//! never tells a different story from the API.

use serde_json::Value;

/// Every field of a JSON object, one per line in key order, keys aligned; nested objects are
/// flattened with dotted keys, arrays joined with ", ", `null` shown as `-`.
pub fn fields(body: &Value) -> String {
    let mut lines = Vec::new();
    flatten("", body, &mut lines);
    let width = lines.iter().map(|(key, _)| key.len()).max().unwrap_or(0);
    lines
        .iter()
        .map(|(key, value)| format!("{key:width$}  {value}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn flatten(prefix: &str, value: &Value, lines: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) if !map.is_empty() || prefix.is_empty() => {
            for (key, value) in map {
                let key = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&key, value, lines);
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {
            for (index, item) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{index}]"), item, lines);
            }
        }
        other => lines.push((prefix.to_string(), scalar(other))),
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "-".to_string(),
        Value::String(text) => text.clone(),
        Value::Array(items) if items.is_empty() => "-".to_string(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// Most characters of an executor's error a runs table shows.
const ERROR_CHARS: usize = 120;

/// The first line of `text`, cut to [`ERROR_CHARS`] characters (with `…` when cut).
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > ERROR_CHARS {
        let cut: String = line.chars().take(ERROR_CHARS).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

/// The columns of [`runs_table`]: (header, field of a run).
const RUN_COLUMNS: [(&str, &str); 8] = [
    ("RUN_AT", "run_at"),
    ("SCHEDULE", "schedule_id"),
    ("STATUS", "status"),
    ("SOURCE", "source"),
    ("ATTEMPT", "attempt"),
    ("PUBLISHED_AT", "published_at"),
    ("KEY", "idempotency_key"),
    ("REASON", "reason"),
];

/// `{runs: [...]}` as a table, newest first as the API answered, one run per line; the
/// reason last because it is the longest: for a failed or timed-out run the executor's
/// error itself (its first line, at most [`ERROR_CHARS`] characters; `--json` has it
/// whole), else the reason, the last error, then why it is late. "no runs" when the list
/// is empty.
pub fn runs_table(body: &Value) -> String {
    let runs = body["runs"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let failed = |run: &Value| matches!(run["status"].as_str(), Some("FAILED" | "TIMED_OUT"));
    let cell = |run: &Value, field: &str| match (field, &run[field]) {
        ("reason", _) if failed(run) && run["last_error"].is_string() => {
            first_line(run["last_error"].as_str().unwrap_or_default())
        }
        ("reason", Value::Null) if run["last_error"].is_null() => scalar(&run["late_reason"]),
        ("reason", Value::Null) => scalar(&run["last_error"]),
        (_, value) => scalar(value),
    };
    table(runs, &RUN_COLUMNS, &cell, "no runs")
}

/// The columns of [`schedules_table`].
const SCHEDULE_COLUMNS: [(&str, &str); 7] = [
    ("SCHEDULE_ID", "schedule_id"),
    ("WORKFLOW", "workflow_id"),
    ("VERSION", "version"),
    ("SPEC", "cron_expr"),
    ("TIMEZONE", "timezone"),
    ("PAUSED", "paused"),
    ("NEXT_RUN_AT", "next_run_at"),
];

/// `{schedules: [...]}` as a table; "no schedules" when the page is empty.
pub fn schedules_table(body: &Value) -> String {
    listing(body, "schedules", &SCHEDULE_COLUMNS, "no schedules")
}

/// The columns of [`workflows_table`].
const WORKFLOW_COLUMNS: [(&str, &str); 5] = [
    ("WORKFLOW_ID", "workflow_id"),
    ("VERSIONS", "versions"),
    ("LATEST", "latest_version"),
    ("STORED_AT", "latest_created_at"),
    ("SCHEDULES", "schedules"),
];

/// `{workflows: [...]}` as a table; "no workflows" when the page is empty.
pub fn workflows_table(body: &Value) -> String {
    listing(body, "workflows", &WORKFLOW_COLUMNS, "no workflows")
}

/// The columns of [`versions_table`].
const VERSION_COLUMNS: [(&str, &str); 3] = [
    ("VERSION", "version"),
    ("STORED_AT", "created_at"),
    ("SCHEDULES", "schedules"),
];

/// `{versions: [...]}` as a table, newest first as the API answered.
pub fn versions_table(body: &Value) -> String {
    listing(body, "versions", &VERSION_COLUMNS, "no versions")
}

/// The list under `key` of `body` as a table of `columns`, each cell the field as it is.
fn listing(body: &Value, key: &str, columns: &[(&str, &str)], empty: &str) -> String {
    let rows = body[key].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let cell = |row: &Value, field: &str| scalar(&row[field]);
    table(rows, columns, &cell, empty)
}

/// The columns of [`calendars_table`] (`dates` shows how many).
const CALENDAR_COLUMNS: [(&str, &str); 4] = [
    ("NAME", "name"),
    ("DATES", "dates"),
    ("REVISION", "revision"),
    ("DESCRIPTION", "description"),
];

/// `{calendars: [...]}` as a table; "no calendars" when there is none.
pub fn calendars_table(body: &Value) -> String {
    let rows = body["calendars"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let cell = |row: &Value, field: &str| match &row[field] {
        Value::Array(dates) if field == "dates" => dates.len().to_string(),
        value => scalar(value),
    };
    table(rows, &CALENDAR_COLUMNS, &cell, "no calendars")
}

/// The columns of [`history_table`] (`changes` as `field: old -> new; ...`).
const HISTORY_COLUMNS: [(&str, &str); 6] = [
    ("AT", "at"),
    ("ACTOR", "actor"),
    ("KIND", "kind"),
    ("REQUEST_ID", "request_id"),
    ("CHANGES", "changes"),
    ("NOTE", "note"),
];

/// `{history: [...]}` as a table, newest first as the API answered; "no changes" when there
/// is none.
pub fn history_table(body: &Value) -> String {
    let rows = body["history"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let cell = |row: &Value, field: &str| match &row[field] {
        Value::Array(changes) if field == "changes" => changes
            .iter()
            .map(|c| {
                let field = c["field"].as_str().unwrap_or_default();
                format!("{field}: {} -> {}", scalar(&c["old"]), scalar(&c["new"]))
            })
            .collect::<Vec<_>>()
            .join("; "),
        value => scalar(value),
    };
    table(rows, &HISTORY_COLUMNS, &cell, "no changes")
}

/// The columns of [`skips_table`].
const SKIP_COLUMNS: [(&str, &str); 4] = [
    ("RUN_AT", "run_at"),
    ("SKIPPED_BY", "skipped_by"),
    ("CREATED_AT", "created_at"),
    ("NOTE", "note"),
];

/// `{skips: [...]}` as a table, in tick order; "no skips" when there is none.
pub fn skips_table(body: &Value) -> String {
    let rows = body["skips"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let cell = |row: &Value, field: &str| scalar(&row[field]);
    table(rows, &SKIP_COLUMNS, &cell, "no skips")
}

/// Rows as aligned columns under a header line; `empty` alone when there is no row.
fn table(
    rows: &[Value],
    columns: &[(&str, &str)],
    cell: &dyn Fn(&Value, &str) -> String,
    empty: &str,
) -> String {
    if rows.is_empty() {
        return format!("{empty}\n");
    }
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| columns.iter().map(|(_, field)| cell(row, field)).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (header, _))| {
            rows.iter()
                .map(|row| row[i].len())
                .chain([header.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let mut text = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect::<Vec<_>>()
            .join("  ");
        text.truncate(text.trim_end().len());
        text.push('\n');
        text
    };
    let mut out = line(columns.iter().map(|(header, _)| *header).collect());
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_flatten_stats_and_show_null_as_a_dash() {
        let body = json!({
            "schedule_id": "s1",
            "paused": false,
            "preview": ["2026-03-09T11:00:00Z", "2026-03-10T11:00:00Z"],
            "stats": {
                "last_fire_at": "2026-03-08T10:00:00Z",
                "missed_ticks": 3,
                "last_not_launched": {"run_at": "2026-03-08T09:00:00Z", "status": "SKIPPED"},
                "why": null
            }
        });
        assert_eq!(
            fields(&body),
            "paused                          false\n\
             preview                         2026-03-09T11:00:00Z, 2026-03-10T11:00:00Z\n\
             schedule_id                     s1\n\
             stats.last_fire_at              2026-03-08T10:00:00Z\n\
             stats.last_not_launched.run_at  2026-03-08T09:00:00Z\n\
             stats.last_not_launched.status  SKIPPED\n\
             stats.missed_ticks              3\n\
             stats.why                       -"
        );
    }

    #[test]
    fn fields_index_lists_of_objects() {
        let body = json!({"created": true, "schedules": [{"schedule_id": "a", "revision": 1}]});
        assert_eq!(
            fields(&body),
            "created                   true\n\
             schedules[0].revision     1\n\
             schedules[0].schedule_id  a"
        );
    }

    #[test]
    fn runs_table_aligns_columns_and_falls_back_to_the_last_error() {
        let body = json!({"runs": [
            {"run_at": "2026-03-08T10:00:00Z", "schedule_id": "s1", "status": "SKIPPED",
             "source": "schedule", "attempt": 1, "published_at": null, "idempotency_key": "ab12",
             "reason": "overlap skip: run cd34 is in flight", "last_error": null},
            {"run_at": "2026-03-08T09:00:00Z", "schedule_id": "s1", "status": "FAILED",
             "source": "manual", "attempt": 2, "published_at": null, "idempotency_key": "cd34",
             "reason": null, "last_error": "dag missing"},
        ]});
        assert_eq!(
            runs_table(&body),
            "RUN_AT                SCHEDULE  STATUS   SOURCE    ATTEMPT  PUBLISHED_AT  KEY   REASON\n\
             2026-03-08T10:00:00Z  s1        SKIPPED  schedule  1        -             ab12  overlap skip: run cd34 is in flight\n\
             2026-03-08T09:00:00Z  s1        FAILED   manual    2        -             cd34  dag missing\n"
        );
        assert_eq!(runs_table(&json!({"runs": []})), "no runs\n");
    }
}

#[cfg(test)]
mod run_table_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_run_shows_its_schedule_and_the_executors_error_itself() {
        let long = "x".repeat(200);
        let body = json!({"runs": [
            {"run_at": "2026-03-09T07:00:00Z", "schedule_id": "nightly", "status": "FAILED",
             "source": "schedule", "attempt": 2, "published_at": null, "idempotency_key": "k1",
             "reason": "executor reported FAILED", "last_error": "disk full\nat step 3"},
            {"run_at": "2026-03-09T06:00:00Z", "schedule_id": "nightly", "status": "TIMED_OUT",
             "source": "schedule", "attempt": 1, "published_at": null, "idempotency_key": "k2",
             "reason": "timed out", "last_error": long},
        ]});
        let table = runs_table(&body);
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[0].starts_with("RUN_AT") && lines[0].contains("SCHEDULE"),
            "{table}"
        );
        assert!(
            lines[1].contains("nightly") && lines[1].ends_with("disk full"),
            "{table}"
        );
        assert!(!table.contains("executor reported FAILED"), "{table}");
        assert!(
            lines[2].ends_with(&format!("{}…", "x".repeat(120))),
            "{table}"
        );
    }
}
