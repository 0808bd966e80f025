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

/// `GET /runs/{key}` for `fields`: each reported output replaced by how many lines it has
/// and the command that prints it (an output is many lines; `kairos runs logs` shows it).
pub fn outputs_elided(body: &Value, key: &str) -> Value {
    let mut body = body.clone();
    if let Some(logs) = body["logs"].as_array_mut() {
        for log in logs {
            if let Some(output) = log["output"].as_str() {
                let lines = output.lines().count();
                let attempt = &log["attempt"];
                log["output"] = Value::String(format!(
                    "{lines} line{} (kairos runs logs {key} --attempt {attempt})",
                    if lines == 1 { "" } else { "s" }
                ));
            }
        }
    }
    body
}

/// The logs of `GET /runs/{key}` as text: per attempt (or only `attempt`), a header, the
/// link to its logs and its output.
///
/// # Errors
/// `attempt` names an attempt that reported no logs.
pub fn logs_text(body: &Value, key: &str, attempt: Option<u32>) -> anyhow::Result<String> {
    let logs = body["logs"].as_array().cloned().unwrap_or_default();
    let chosen: Vec<&Value> = logs
        .iter()
        .filter(|log| attempt.is_none_or(|n| log["attempt"].as_u64() == Some(u64::from(n))))
        .collect();
    if chosen.is_empty() {
        let reported: Vec<String> = logs.iter().map(|log| log["attempt"].to_string()).collect();
        match attempt {
            Some(n) if !reported.is_empty() => anyhow::bail!(
                "attempt {n} of run {key} reported no logs; attempts with logs: {}",
                reported.join(", ")
            ),
            Some(n) => anyhow::bail!("attempt {n} of run {key} reported no logs"),
            None => {
                return Ok(format!(
                    "No executor reported logs for run {key} (an executor sends log_url and \
                     output with its status reports).\n"
                ))
            }
        }
    }
    let mut text = String::new();
    for log in chosen {
        text.push_str(&format!(
            "== attempt {} (reported {}) ==\n",
            log["attempt"],
            log["updated_at"].as_str().unwrap_or("-")
        ));
        if let Some(url) = log["log_url"].as_str() {
            text.push_str(&format!("logs: {url}\n"));
        }
        match log["output"].as_str() {
            Some(output) => {
                text.push_str(output);
                if !output.ends_with('\n') {
                    text.push('\n');
                }
            }
            None => text.push_str("(no output reported)\n"),
        }
    }
    Ok(text)
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
const SCHEDULE_COLUMNS: [(&str, &str); 8] = [
    ("SCHEDULE_ID", "schedule_id"),
    ("WORKFLOW", "workflow_id"),
    ("VERSION", "version"),
    ("SPEC", "cron_expr"),
    ("TIMEZONE", "timezone"),
    ("REGION", "region"),
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

/// The columns of [`history_table`] (`changes` as `field: old -> new; ...`, last: it is the
/// longest, and the last column is never padded or cut).
const HISTORY_COLUMNS: [(&str, &str); 6] = [
    ("AT", "at"),
    ("ACTOR", "actor"),
    ("KIND", "kind"),
    ("REQUEST_ID", "request_id"),
    ("NOTE", "note"),
    ("CHANGES", "changes"),
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

/// The widest a free-text column ([`FREE_TEXT`]) but the last is printed: a longer cell is
/// cut, ending in `…` (`--json` prints it whole). Ids, keys, specs and times are never cut.
const MAX_COLUMN_CHARS: usize = 60;

/// The fields whose cells are prose, which a table may cut.
const FREE_TEXT: [&str; 5] = ["note", "description", "reason", "changes", "skipped_by"];

/// `cell` cut to `width` characters, ending in `…` when cut.
fn cut(cell: &str, width: usize) -> String {
    if cell.chars().count() <= width {
        return cell.to_string();
    }
    let kept: String = cell.chars().take(width.saturating_sub(1)).collect();
    format!("{kept}…")
}

/// Rows as aligned columns under a header line; `empty` alone when there is no row. Every
/// free-text column but the last is at most [`MAX_COLUMN_CHARS`] wide.
fn table(
    rows: &[Value],
    columns: &[(&str, &str)],
    cell: &dyn Fn(&Value, &str) -> String,
    empty: &str,
) -> String {
    if rows.is_empty() {
        return format!("{empty}\n");
    }
    let last = columns.len().saturating_sub(1);
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .enumerate()
                .map(|(i, (_, field))| {
                    let text = cell(row, field);
                    if i == last || !FREE_TEXT.contains(field) {
                        text
                    } else {
                        cut(&text, MAX_COLUMN_CHARS)
                    }
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (header, _))| {
            rows.iter()
                .map(|row| row[i].chars().count())
                .chain([header.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let mut text = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| {
                let pad = width.saturating_sub(cell.chars().count());
                format!("{cell}{}", " ".repeat(pad))
            })
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
    fn schedules_table_shows_each_schedules_region_or_a_dash() {
        let body = json!({"schedules": [
            {"schedule_id": "s1", "workflow_id": "wf", "version": 1, "cron_expr": "* * * * *",
             "timezone": "UTC", "region": "eu", "paused": false, "next_run_at": null},
            {"schedule_id": "s2", "workflow_id": "wf", "version": 1, "cron_expr": "* * * * *",
             "timezone": "UTC", "region": null, "paused": false, "next_run_at": null},
        ]});
        let text = schedules_table(&body);
        let lines: Vec<&str> = text.lines().collect();
        let at = lines[0].find("REGION").expect("a REGION column");
        assert!(lines[1][at..].starts_with("eu "), "{text}");
        assert!(lines[2][at..].starts_with("- "), "{text}");
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

    #[test]
    fn a_long_change_is_never_padded_and_the_note_stays_near() {
        let dag = "d".repeat(300);
        let body = json!({"history": [
            {"at": "2026-03-09T07:00:00Z", "actor": "compiler", "kind": "updated",
             "request_id": null, "note": "deploy 42",
             "changes": [{"field": "description", "old": null, "new": dag}]},
            {"at": "2026-03-09T06:00:00Z", "actor": "compiler", "kind": "created",
             "request_id": "r-1", "note": null, "changes": []},
        ]});
        let table = history_table(&body);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].ends_with("NOTE       CHANGES"), "{table}");
        assert!(
            lines[1].contains("deploy 42  description: - -> ddd"),
            "{table}"
        );
        assert!(lines[2].len() < 90, "a short row is not padded: {table}");
        assert!(lines.iter().all(|line| !line.ends_with(' ')), "{table}");
    }

    #[test]
    fn free_text_but_the_last_column_is_cut_at_sixty_characters_and_ids_never() {
        let long = "n".repeat(100);
        let body = json!({"skips": [
            {"run_at": "2026-03-09T07:00:00Z", "skipped_by": long, "created_at": "x", "note": "z"},
        ]});
        let table = skips_table(&body);
        assert!(
            table.contains(&format!("{}…  x", "n".repeat(59))),
            "{table}"
        );
        let key = "k".repeat(64);
        let id = "s".repeat(200);
        let body = json!({"runs": [
            {"run_at": "2026-03-09T07:00:00Z", "schedule_id": id, "status": "PENDING",
             "source": "manual", "attempt": 1, "published_at": null, "idempotency_key": key,
             "reason": null, "last_error": null},
        ]});
        let table = runs_table(&body);
        assert!(table.contains(&key) && table.contains(&id), "{table}");
    }

    #[test]
    fn logs_print_each_attempt_and_refuse_an_attempt_without_any() {
        let body = json!({"logs": [
            {"attempt": 1, "log_url": "https://logs.example.com/1", "output": "one\ntwo",
             "updated_at": "2026-03-09T07:01:00Z"},
            {"attempt": 2, "log_url": null, "output": null, "updated_at": "2026-03-09T07:05:00Z"},
        ]});
        let text = logs_text(&body, "k1", None).expect("logs");
        assert_eq!(
            text,
            "== attempt 1 (reported 2026-03-09T07:01:00Z) ==\nlogs: https://logs.example.com/1\n\
             one\ntwo\n== attempt 2 (reported 2026-03-09T07:05:00Z) ==\n(no output reported)\n"
        );
        let one = logs_text(&body, "k1", Some(2)).expect("attempt 2");
        assert!(one.starts_with("== attempt 2"), "{one}");
        let err = logs_text(&body, "k1", Some(3)).expect_err("no attempt 3");
        assert_eq!(
            err.to_string(),
            "attempt 3 of run k1 reported no logs; attempts with logs: 1, 2"
        );
        let none = logs_text(&json!({"logs": []}), "k1", None).expect("none");
        assert!(
            none.starts_with("No executor reported logs for run k1"),
            "{none}"
        );
        let elided = outputs_elided(&body, "k1");
        assert_eq!(
            elided["logs"][0]["output"],
            "2 lines (kairos runs logs k1 --attempt 1)"
        );
    }
}
