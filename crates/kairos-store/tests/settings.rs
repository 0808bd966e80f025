//! The server settings kairos names at start when they are not what it needs.

use kairos_testkit::TestDb;

#[tokio::test]
async fn autovacuum_off_is_named_with_the_value_kairos_needs() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (autovacuum, track_counts): (String, String) =
        sqlx::query_as("select current_setting('autovacuum'), current_setting('track_counts')")
            .fetch_one(&pool)
            .await
            .expect("settings");
    let advice = kairos_store::settings::advice(&pool).await.expect("advice");
    let named: Vec<(&str, &str)> = advice
        .iter()
        .map(|a| (a.setting, a.value.as_str()))
        .collect();
    let mut expected = Vec::new();
    if autovacuum != "on" {
        expected.push(("autovacuum", autovacuum.as_str()));
    }
    if track_counts != "on" {
        expected.push(("track_counts", track_counts.as_str()));
    }
    assert_eq!(named, expected);
    for a in &advice {
        assert!(a.wanted.starts_with("on"), "{a:?}");
        assert!(a.why.contains("schedule_runs"), "{a:?}");
    }
}

#[tokio::test]
async fn every_kairos_session_plans_for_its_batches_whatever_the_server_defaults() {
    let db = TestDb::new().await;
    let pool = kairos_store::connect(&db.url(), 2).await.expect("connect");
    let settings: (String, String, String, String) = sqlx::query_as(
        "select current_setting('jit'), current_setting('random_page_cost'), \
                current_setting('statement_timeout'), \
                current_setting('idle_in_transaction_session_timeout')",
    )
    .fetch_one(&pool)
    .await
    .expect("settings");
    assert_eq!(
        settings,
        ("off".into(), "1.1".into(), "1min".into(), "30s".into())
    );
}
