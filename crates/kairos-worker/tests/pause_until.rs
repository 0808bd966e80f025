//! Pausing until a time, on real PostgreSQL with pinned database clocks: the schedule stays
//! paused before `until`; the first planner pass at or after it resumes it, exactly as a
//! resume by a caller (note, `until` and who cleared; ticks planned from `until` on, those
//! older than the misfire grace by the schedule's catch-up policy); two instances passing at
//! once resume it once; a manual resume before `until` clears it.

use crate::planner_support;

use chrono::{DateTime, Utc};
use kairos_core::RunStatus;
use kairos_registrar::{Error, PauseChange};
use kairos_testkit::TestDb;
use planner_support::{
    drain, input, other_pool, planner, registrar, run_ats, runs_of, stored, ts, upsert,
};

fn until(at: &str) -> PauseChange<'static> {
    PauseChange {
        paused: true,
        note: Some("vendor freeze"),
        until: Some(ts(at)),
    }
}

#[tokio::test]
async fn the_schedule_resumes_by_itself_at_until_as_a_resume_would() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:30:00Z", input("hourly", "0 * * * *")).await;
    let paused = registrar(&pool, "2026-03-09T10:31:00Z")
        .pause("hourly", until("2026-03-09T12:00:00Z"), "ops")
        .await
        .expect("pause until");
    assert_eq!(
        (
            paused.paused,
            paused.paused_until,
            paused.paused_by.as_deref(),
            paused.pause_note.as_deref()
        ),
        (
            true,
            Some(ts("2026-03-09T12:00:00Z")),
            Some("ops"),
            Some("vendor freeze")
        )
    );

    // Before `until` nothing is planned, not even within the lookahead of its end.
    drain(&planner(&pool, "2026-03-09T11:59:30Z")).await;
    assert!(runs_of(&pool, "hourly").await.is_empty());
    assert!(stored(&pool, "hourly").await.paused);

    // The first pass at `until` resumes it and plans the tick at `until` in the same pass.
    let reports = drain(&planner(&pool, "2026-03-09T12:00:00Z")).await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    let resumed = stored(&pool, "hourly").await;
    assert_eq!(
        (
            resumed.paused,
            resumed.paused_until,
            resumed.paused_by,
            resumed.pause_note
        ),
        (false, None, None, None),
        "cleared as a manual resume clears them"
    );
    assert_eq!(resumed.revision, paused.revision + 1);
    let runs = runs_of(&pool, "hourly").await;
    assert_eq!(
        run_ats(&pool, "hourly").await,
        vec![ts("2026-03-09T12:00:00Z")]
    );
    assert_eq!(runs[0].status, RunStatus::Pending);
}

#[tokio::test]
async fn a_late_resume_catches_up_per_the_catchup_policy() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut caught_up = input("fire-all", "*/10 * * * *");
    caught_up.catchup_policy = Some("fire_immediately".into());
    upsert(&pool, "2026-03-09T10:30:00Z", caught_up).await;
    upsert(
        &pool,
        "2026-03-09T10:30:00Z",
        input("skip-missed", "*/10 * * * *"),
    )
    .await;
    let at = registrar(&pool, "2026-03-09T10:31:00Z");
    for id in ["fire-all", "skip-missed"] {
        at.pause(id, until("2026-03-09T12:00:00Z"), "ops")
            .await
            .expect("pause until");
    }
    // No planner ran between 12:00 and 12:30 (every instance was down): the first pass
    // resumes from 12:00, and the ticks older than the grace follow each catch-up policy.
    drain(&planner(&pool, "2026-03-09T12:30:00Z")).await;
    let expect = |ticks: &[&str]| -> Vec<DateTime<Utc>> { ticks.iter().map(|t| ts(t)).collect() };
    assert_eq!(
        run_ats(&pool, "fire-all").await,
        expect(&[
            "2026-03-09T12:00:00Z",
            "2026-03-09T12:10:00Z",
            "2026-03-09T12:20:00Z",
            "2026-03-09T12:30:00Z"
        ]),
        "fire_immediately: the missed ticks of [until, now) are fired"
    );
    assert_eq!(
        run_ats(&pool, "skip-missed").await,
        expect(&["2026-03-09T12:30:00Z"]),
        "none (the default): only the tick within the grace fires"
    );
}

#[tokio::test]
async fn two_instances_resume_it_once() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:30:00Z", input("hourly", "0 * * * *")).await;
    let paused = registrar(&pool, "2026-03-09T10:31:00Z")
        .pause("hourly", until("2026-03-09T12:00:00Z"), "ops")
        .await
        .expect("pause until");
    let other = other_pool(&pool).await;
    let (a, b) = (
        planner(&pool, "2026-03-09T12:00:05Z"),
        planner(&other, "2026-03-09T12:00:05Z"),
    );
    let (first, second) = tokio::join!(a.pass(), b.pass());
    first.expect("pass a");
    second.expect("pass b");
    // And each again, after both committed: a resumed schedule is no longer paused.
    a.pass().await.expect("pass a again");
    b.pass().await.expect("pass b again");
    let resumed = stored(&pool, "hourly").await;
    assert!(!resumed.paused);
    assert_eq!(
        resumed.revision,
        paused.revision + 1,
        "exactly one resume was written"
    );
    assert_eq!(
        run_ats(&pool, "hourly").await,
        vec![ts("2026-03-09T12:00:00Z")]
    );
    let mut tx = kairos_store::Tx::begin(&pool).await.expect("begin");
    let again = kairos_registrar::resume_ended_pauses(&mut tx, ts("2026-03-09T12:00:10Z"), 10)
        .await
        .expect("resume again");
    assert!(again.is_empty(), "a second resume is a no-op: {again:?}");
}

#[tokio::test]
async fn until_is_checked_and_a_manual_resume_clears_it() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:30:00Z", input("hourly", "0 * * * *")).await;
    let at = registrar(&pool, "2026-03-09T10:31:00Z");
    let past = at
        .pause("hourly", until("2026-03-09T10:00:00Z"), "ops")
        .await;
    assert!(
        matches!(&past, Err(Error::Invalid(p)) if p[0].field == "until" && p[0].rule.contains("not in the future")),
        "{past:?}"
    );
    let resume_until = PauseChange {
        paused: false,
        note: None,
        until: Some(ts("2026-03-09T12:00:00Z")),
    };
    let refused = at.pause("hourly", resume_until, "ops").await;
    assert!(
        matches!(&refused, Err(Error::Invalid(p)) if p[0].field == "until"),
        "{refused:?}"
    );
    assert!(!stored(&pool, "hourly").await.paused, "nothing changed");

    at.pause("hourly", until("2026-03-09T12:00:00Z"), "ops")
        .await
        .expect("pause until");
    let resumed = registrar(&pool, "2026-03-09T11:00:00Z")
        .pause("hourly", PauseChange::default(), "ops")
        .await
        .expect("resume by hand");
    assert_eq!((resumed.paused, resumed.paused_until), (false, None));
    // Re-pausing without until pauses until a resume: a later pass resumes nothing.
    at.pause(
        "hourly",
        PauseChange {
            paused: true,
            note: None,
            until: None,
        },
        "ops",
    )
    .await
    .expect("pause");
    drain(&planner(&pool, "2026-03-09T12:00:30Z")).await;
    assert!(stored(&pool, "hourly").await.paused);
}
