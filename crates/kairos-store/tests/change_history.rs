//! The history of changes on real PostgreSQL: a change recorded in a transaction that rolls
//! back is gone with it; a deploy's many changes go in one statement whatever their number;
//! values come back as written.

use chrono::{DateTime, Utc};
use kairos_core::{Actor, Change, ChangeKind, FieldChange, FieldValue, HistoryFilter, Subject};
use kairos_store::{history, Tx};
use kairos_testkit::TestDb;

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("rfc3339")
}

fn change(schedule_id: &str, kind: ChangeKind) -> Change {
    Change {
        subject: Subject::schedule(schedule_id, "wf"),
        kind,
        actor: Actor::new("compiler", Some("req-1".into())),
        note: Some("why".into()),
        fields: vec![
            FieldChange::new("priority", 0, 5),
            FieldChange::new("exclude", FieldValue::Null, vec!["0 0 25 12 *"]),
            FieldChange::new("retry_backoff_multiplier", 1.5, FieldValue::Null),
        ],
    }
}

fn everything(limit: i64) -> HistoryFilter {
    HistoryFilter {
        limit,
        ..HistoryFilter::default()
    }
}

#[tokio::test]
async fn a_change_rolls_back_with_its_transaction() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let now = at("2026-03-09T12:00:00Z");
    let mut tx = Tx::begin(&pool).await.expect("begin");
    history::record(&mut tx, &change("s1", ChangeKind::Update), now)
        .await
        .expect("record");
    drop(tx);
    assert!(history::list(&pool, &everything(10))
        .await
        .expect("list")
        .is_empty());

    let mut tx = Tx::begin(&pool).await.expect("begin");
    history::record(&mut tx, &change("s1", ChangeKind::Update), now)
        .await
        .expect("record");
    tx.commit().await.expect("commit");
    let listed = history::list(&pool, &everything(10)).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].at, now);
    assert_eq!(listed[0].change, change("s1", ChangeKind::Update));
}

#[tokio::test]
async fn many_changes_go_in_one_statement() {
    let db = TestDb::new().await;
    let pool = db.pool();
    // More rows than one statement could bind as separate parameters (65,535 / 11).
    let changes: Vec<Change> = (0..7000)
        .map(|n| change(&format!("s{n:04}"), ChangeKind::DeploySync))
        .collect();
    let mut conn = pool.acquire().await.expect("connection");
    history::record_many(&mut conn, &changes, at("2026-03-09T12:00:00Z"))
        .await
        .expect("record");
    let listed = history::list(&pool, &everything(10_000))
        .await
        .expect("list");
    assert_eq!(listed.len(), 7000);
    // Newest first: the last change written has the largest id.
    assert_eq!(
        listed[0].change.subject.schedule_id.as_deref(),
        Some("s6999")
    );
    let one = HistoryFilter {
        schedule_id: Some("s0042".into()),
        kind: Some(ChangeKind::DeploySync),
        ..everything(10)
    };
    let found = history::list(&pool, &one).await.expect("list");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].change, change("s0042", ChangeKind::DeploySync));
    let older = HistoryFilter {
        before_id: Some(found[0].id),
        ..everything(10_000)
    };
    assert_eq!(history::list(&pool, &older).await.expect("list").len(), 42);
}
