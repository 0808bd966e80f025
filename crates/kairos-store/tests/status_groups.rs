//! The status groups the migrations build on (partial indexes of `schedule_runs`, the
//! trigger that keeps `runs_in_flight`) are kairos-core's run phases, the same lists the
//! store writes into its statements from the enum. A statement's `status in (…)` must read
//! exactly like its index's predicate for PostgreSQL to use the index, and the one-in-flight
//! rule must hold the same statuses the dispatcher and the intake treat as holding.

use kairos_testkit::TestDb;
use std::collections::BTreeSet;

use kairos_core::RunStatus;

fn phase(phase: fn(RunStatus) -> bool) -> BTreeSet<String> {
    RunStatus::every(phase)
        .map(|s| s.as_str().to_string())
        .collect()
}

fn only(status: RunStatus) -> BTreeSet<String> {
    BTreeSet::from([status.as_str().to_string()])
}

/// The quoted names in `text` that are run statuses.
fn statuses_in(text: &str) -> BTreeSet<String> {
    text.split('\'')
        .skip(1)
        .step_by(2)
        .filter(|word| RunStatus::ALL.iter().any(|s| s.as_str() == *word))
        .map(str::to_string)
        .collect()
}

/// Every list in `text` that starts after `open` and ends at `close` (at least one) is the
/// set of statuses that hold a schedule.
fn assert_every_list_holding(text: &str, open: &str, close: char) {
    let lists: Vec<&str> = text.split(open).skip(1).collect();
    assert!(!lists.is_empty(), "no {open} in {text}");
    for list in lists {
        let list = list.split(close).next().unwrap_or_default();
        assert_eq!(
            statuses_in(list),
            phase(RunStatus::holds_schedule),
            "{text}"
        );
    }
}

#[tokio::test]
async fn partial_indexes_and_the_in_flight_trigger_are_built_on_the_core_phases() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "select indexname, indexdef from pg_indexes \
         where tablename = 'schedule_runs' and indexdef like '%status%WHERE%' \
            or tablename = 'schedule_runs' and indexdef like '%WHERE%status%'",
    )
    .fetch_all(&pool)
    .await
    .expect("indexes");
    assert!(indexes.len() >= 4, "{indexes:?}");
    for (name, definition) in &indexes {
        let predicate = definition.split(" WHERE ").nth(1).unwrap_or_default();
        let expected = match name.as_str() {
            "schedule_runs_in_flight" => phase(RunStatus::holds_schedule),
            "schedule_runs_claim" | "schedule_runs_due" => phase(RunStatus::awaits_launch),
            "schedule_runs_queued" => only(RunStatus::Queued),
            "schedule_runs_enqueued" => only(RunStatus::Enqueued),
            other => panic!("partial index {other} on status is not classified here: {definition}"),
        };
        assert_eq!(statuses_in(predicate), expected, "{name}: {definition}");
    }

    let trigger: String = sqlx::query_scalar(
        "select pg_get_functiondef(p.oid) from pg_proc p where p.proname = 'kairos_one_in_flight'",
    )
    .fetch_one(&pool)
    .await
    .expect("the one-in-flight trigger function");
    assert_every_list_holding(&trigger, "status in (", ')');
    // The function decides alone which rows enter or leave the set: its triggers fire once
    // per statement (insert, update, delete), with no condition of their own.
    let triggers: Vec<String> = sqlx::query_scalar(
        "select pg_get_triggerdef(t.oid) from pg_trigger t \
         where t.tgrelid = 'schedule_runs'::regclass \
           and t.tgname like 'schedule_runs_one_in_flight%'",
    )
    .fetch_all(&pool)
    .await
    .expect("the one-in-flight triggers");
    assert_eq!(triggers.len(), 3, "{triggers:?}");
    for trigger in &triggers {
        assert!(trigger.contains("FOR EACH STATEMENT"), "{trigger}");
        assert!(!trigger.contains("WHEN"), "{trigger}");
    }
}
