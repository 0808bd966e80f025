//! Routing, case by case.

use super::*;
use chrono::{TimeZone, Utc};
use kairos_core::{OverlapPolicy, RunSource, RunStatus};

fn run(home: Option<&str>, fallbacks: &[&str], pinned: Option<&str>) -> Claimed {
    let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    Claimed {
        idempotency_key: "k".into(),
        schedule_id: "s".into(),
        run_at: at,
        fire_at: at,
        source: RunSource::Schedule,
        status: RunStatus::Pending,
        attempt: 1,
        exclusive: false,
        workflow_id: "w".into(),
        version: 1,
        user_id: "u".into(),
        overlap_policy: OverlapPolicy::Allow,
        late: false,
        revision: None,
        schedule_revision: Some(1),
        home_region: home.map(str::to_string),
        fallback_regions: fallbacks.iter().map(|r| r.to_string()).collect(),
        launch_region: pinned.map(str::to_string),
        region: pinned.or(home).map(str::to_string),
    }
}

fn regions() -> (Arc<Regions>, Instant) {
    let names: Vec<String> = ["eu", "us", "ap"].iter().map(|r| r.to_string()).collect();
    (
        Regions::new(&names, Duration::from_secs(10)),
        Instant::now(),
    )
}

fn hold(region: &str, pin: bool) -> Route {
    Route::Hold {
        region: region.into(),
        pin,
    }
}

#[test]
fn a_run_without_a_region_goes_out_as_always() {
    let (regions, now) = regions();
    regions.observe("eu", false, now);
    let mut run = run(None, &[], None);
    assert_eq!(regions.route(&mut run, now), Route::Go);
    assert_eq!(run.region, None);
}

#[test]
fn a_ready_home_takes_its_runs() {
    let (regions, now) = regions();
    let mut run = run(Some("eu"), &["us"], None);
    assert_eq!(regions.route(&mut run, now), Route::Go);
    assert_eq!(run.region.as_deref(), Some("eu"));
}

#[test]
fn a_home_not_ready_holds_its_runs_until_it_is_away_then_they_go_to_the_first_ready_fallback() {
    let (regions, now) = regions();
    regions.observe("eu", false, now);
    regions.observe("us", false, now);
    let mut early = run(Some("eu"), &["us", "ap"], None);
    assert_eq!(regions.route(&mut early, now), hold("eu", false));
    let later = now + Duration::from_secs(10);
    let mut run = run(Some("eu"), &["us", "ap"], None);
    assert_eq!(regions.route(&mut run, later), Route::Go);
    assert_eq!(run.region.as_deref(), Some("ap"));
}

#[test]
fn an_away_home_with_no_ready_fallback_pins_its_runs_home() {
    let (regions, now) = regions();
    regions.observe("eu", false, now);
    regions.observe("us", false, now);
    let later = now + Duration::from_secs(11);
    let mut with_fallback = run(Some("eu"), &["us"], None);
    assert_eq!(regions.route(&mut with_fallback, later), hold("eu", true));
    let mut alone = run(Some("eu"), &[], None);
    assert_eq!(regions.route(&mut alone, later), hold("eu", true));
    assert_eq!(
        regions.unavailable(),
        vec!["eu".to_string(), "us".to_string()]
    );
}

#[test]
fn a_run_recorded_for_a_region_goes_there_again_or_waits_for_it() {
    let (regions, now) = regions();
    regions.observe("eu", false, now);
    let later = now + Duration::from_secs(60);
    let mut pinned = run(Some("eu"), &["us"], Some("eu"));
    assert_eq!(regions.route(&mut pinned, later), hold("eu", false));
    let mut moved = run(Some("us"), &[], Some("ap"));
    assert_eq!(regions.route(&mut moved, later), Route::Go);
    assert_eq!(moved.region.as_deref(), Some("ap"));
}

#[test]
fn a_region_ready_again_takes_new_runs_home() {
    let (regions, now) = regions();
    regions.observe("eu", false, now);
    let later = now + Duration::from_secs(30);
    let mut away = run(Some("eu"), &["us"], None);
    assert_eq!(regions.route(&mut away, later), Route::Go);
    assert_eq!(away.region.as_deref(), Some("us"));
    regions.observe("eu", true, later);
    let mut back = run(Some("eu"), &["us"], None);
    assert_eq!(regions.route(&mut back, later), Route::Go);
    assert_eq!(back.region.as_deref(), Some("eu"));
    assert!(regions.unavailable().is_empty());
}

#[test]
fn an_instance_at_home_claims_in_its_region_and_leaves_unready_ones_alone() {
    let names: Vec<String> = ["eu", "us", "ap"].iter().map(|r| r.to_string()).collect();
    let at_home = Regions::at_home(
        &names,
        Duration::from_secs(10),
        "us",
        Duration::from_millis(3500),
    );
    at_home.observe("ap", false, Instant::now());
    assert_eq!(
        at_home.claim_scope(),
        ClaimScope {
            unavailable: vec!["ap".to_string()],
            region: Some("us".to_string()),
            others_after: Duration::from_millis(3500),
            after: None,
        }
    );
    let (anywhere, _) = regions();
    assert_eq!(anywhere.claim_scope(), ClaimScope::default());
}
