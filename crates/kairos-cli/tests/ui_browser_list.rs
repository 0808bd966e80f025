//! The operator page (`/ui`) in a real browser, from the schedules list: Debian's Chromium,
//! headless, driven through chromedriver against a real `kairos serve` (every role) with
//! PostgreSQL and nats-server, in `auth.mode = tokens` with a deployer and a reader token.
//!
//! A deployer opens the list, finds a schedule and its next fire time, opens it, pauses it
//! (seen paused through the API), triggers it (the run appears on the page), previews and
//! runs a backfill, sees the Runs page and its in-flight view, searches the list, opens a
//! workflow's DAG, and sees the list on a 390x844 phone screen; a reader sees no buttons; a
//! bad token is shown as a 401. Screenshots of each page are saved under
//! `<CARGO_TARGET_TMPDIR>/ui-screenshots/`.
//!
//! If Chromium or chromedriver is missing or cannot start, the test fails: `.ci/run`
//! installs both. The schedule page's own tests are in `ui_browser_schedule.rs`, the runs
//! and run pages' in `ui_browser_runs.rs`.

use crate::browser;
use crate::support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use browser::{
    browser, click, count, js, phone, schedule, screenshot, set_viewport, sign_in, tokens_config,
    type_into, wait_text, Api, Driver, DEPLOYER, READER, WAIT,
};
use fantoccini::Locator;
use serde_json::json;
use support::Served;

#[test]
fn operator_page_in_chromium() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = tokens_config(&dir);
    let config = config.to_str().expect("utf8 path");
    let mut served = Served::launch_with(
        "api,planner,dispatcher,status",
        "ui",
        kairos_testkit::NatsServer::start(),
        &["--config", config],
    );
    served.wait_for("/readyz", " 200 ");
    let driver = Driver::start();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let shots = runtime.block_on(scenario(&served, &driver));
    for shot in shots {
        println!("screenshot: {}", shot.display());
    }
}

async fn scenario(served: &Served, driver: &Driver) -> Vec<PathBuf> {
    let base = format!("http://127.0.0.1:{}", served.port);
    let api = Api {
        http: reqwest::Client::new(),
        base: base.clone(),
    };
    use reqwest::Method;
    let dag =
        json!({"dag": {"nodes": [{"id": "extract"}, {"id": "load", "depends_on": ["extract"]}]}});
    api.call(Method::PUT, "/workflows/report/versions/1", Some(dag))
        .await;
    for body in [
        schedule("nightly-report", "0 7 * * *", "America/New_York", 0),
        schedule("berlin-close", "30 17 * * 1-5", "Europe/Berlin", 90_000),
        schedule("quarter-hour", "*/15 * * * *", "UTC", 0),
    ] {
        api.call(Method::POST, "/schedules/upsert", Some(body))
            .await;
    }
    let expected = api
        .call(Method::GET, "/schedules/nightly-report", None)
        .await;
    let next = expected["preview"][0]
        .as_str()
        .expect("next fire")
        .to_string();
    // 2026-03-09T11:00:00Z -> "2026-03-09 11:00:00 UTC", the form the page shows.
    let next_utc = format!("{} UTC", next.trim_end_matches('Z').replace('T', " "));

    let profile = tempfile::tempdir().expect("profile");
    let client = browser(driver, &profile).await;
    let mut shots = Vec::new();

    // A bad token is refused by the API, and the page says so.
    client.goto(&format!("{base}/ui")).await.expect("open /ui");
    set_viewport(&client, 1280, 800).await;
    sign_in(&client, "not-a-token").await;
    wait_text(&client, "#problem[data-status='401']", "401 Unauthorized").await;

    // The deployer: the list, a schedule and its next fire time in its zone and in UTC.
    sign_in(&client, DEPLOYER).await;
    let row = wait_text(
        &client,
        "tr[data-schedule='nightly-report'] td.next-fire",
        "UTC",
    )
    .await;
    let cell = row.text().await.expect("next fire");
    assert!(cell.contains(&next_utc), "{cell} should show {next_utc}");
    assert!(cell.contains("(America/New_York)"), "{cell}");
    assert_eq!(count(&client, "tr[data-schedule]").await, 3);
    shots.push(screenshot(&client, "list.png").await);

    client
        .find(Locator::Css(
            "tr[data-schedule='nightly-report'] a.schedule-link",
        ))
        .await
        .expect("schedule link")
        .click()
        .await
        .expect("open schedule");
    wait_text(&client, "#schedule-id", "nightly-report").await;
    wait_text(&client, "#spec-words", "at 07:00, every day").await;
    assert_eq!(count(&client, "#upcoming tbody tr").await, 10);

    // Pause with a note, seen through the API and on the page.
    type_into(&client, "#pause-note", "holiday freeze").await;
    click(&client, "#pause-button").await;
    wait_text(&client, "#flash", "Paused nightly-report.").await;
    let got = api
        .call(Method::GET, "/schedules/nightly-report", None)
        .await;
    assert_eq!(got["paused"], json!(true), "{got}");
    assert_eq!(got["pause_note"], json!("holiday freeze"), "{got}");
    wait_text(&client, "#pause-button", "Resume").await;
    wait_text(&client, "#pause-note-text", "holiday freeze").await;

    // Trigger: the run shows up in the page's run table.
    click(&client, "#trigger-button").await;
    wait_text(&client, "#flash", "Triggered nightly-report").await;
    let run = wait_text(&client, "#runs tr.run", "manual").await;
    let key = run.attr("data-key").await.expect("attr").expect("data-key");
    let runs = api
        .call(Method::GET, "/schedules/nightly-report/runs", None)
        .await;
    assert_eq!(runs["runs"][0]["idempotency_key"], json!(key), "{runs}");

    // Backfill: the ticks are shown first, then created on confirmation.
    let to = chrono::Utc::now() - chrono::Duration::hours(1);
    let from = to - chrono::Duration::days(3);
    let rfc = |at: chrono::DateTime<chrono::Utc>| at.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    for (css, value) in [("#backfill-from", rfc(from)), ("#backfill-to", rfc(to))] {
        let input = client
            .find(Locator::Css(css))
            .await
            .expect("backfill input");
        input.send_keys(&value).await.expect("type");
    }
    click(&client, "#backfill-preview").await;
    // What the backfill should create, from the preview API over the same range.
    let preview = api
        .call(
            Method::POST,
            "/schedules/preview",
            Some(
                json!({"cron_expr": "0 7 * * *", "timezone": "America/New_York",
                        "after": rfc(from - chrono::Duration::seconds(1)), "count": 10}),
            ),
        )
        .await;
    let ticks = preview["fire_times"]
        .as_array()
        .expect("fire times")
        .iter()
        .filter(|t| t.as_str().expect("time") <= rfc(to).as_str())
        .count();
    let plan = wait_text(&client, "#plan", &format!("{ticks} ticks")).await;
    assert_eq!(
        plan.attr("data-total").await.expect("attr"),
        Some(ticks.to_string())
    );
    shots.push(screenshot(&client, "schedule.png").await);
    click(&client, "#backfill-confirm").await;
    wait_text(&client, "#flash", &format!("{ticks} runs created")).await;
    let runs = api
        .call(Method::GET, "/schedules/nightly-report/runs", None)
        .await;
    assert_eq!(
        runs["runs"].as_array().map(Vec::len),
        Some(ticks + 1),
        "{runs}"
    );

    // The page reloads its fragment after the backfill: wait for the new runs.
    let deadline = Instant::now() + WAIT;
    while count(&client, "#runs tr.run").await != ticks + 1 {
        assert!(
            Instant::now() < deadline,
            "the backfilled runs never showed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !client
            .find(Locator::Css("#cancel-form"))
            .await
            .expect("cancel form")
            .is_displayed()
            .await
            .expect("displayed"),
        "the cancel form shows only after a cancel button is pressed"
    );
    // Cancel: the page posts {reason} to /runs/{key}/cancel and shows the API's answer or
    // its problem (an API without that route answers 404).
    client
        .find(Locator::Css(&format!("button.cancel[data-key='{key}']")))
        .await
        .expect("cancel button")
        .click()
        .await
        .expect("cancel");
    type_into(&client, "#cancel-reason", "test run").await;
    click(&client, "#cancel-confirm").await;
    let deadline = Instant::now() + WAIT;
    loop {
        let said = client
            .find(Locator::Css("#flash"))
            .await
            .expect("flash")
            .text()
            .await
            .expect("flash text");
        if said.contains("Cancel of run") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no answer to the cancel: {said:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Runs: newest runs across schedules, then the runs in flight and for how long.
    client.goto(&format!("{base}/ui/runs")).await.expect("runs");
    wait_text(&client, "#runs tr.run", "nightly-report").await;
    shots.push(screenshot(&client, "runs.png").await);
    client
        .goto(&format!("{base}/ui/runs?view=in_flight"))
        .await
        .expect("in flight");
    wait_text(&client, "#content h1", "Runs").await;
    wait_text(&client, "#content p.muted", "longest in flight first").await;

    // Search: typed into the box and sent, the list holds only what matches, case aside.
    client.goto(&format!("{base}/ui")).await.expect("list");
    wait_text(&client, "table.schedules", "quarter-hour").await;
    let search = client
        .wait()
        .for_element(Locator::Css("#f-q"))
        .await
        .expect("the search box");
    search.send_keys("BERL\n").await.expect("type a search");
    wait_text(&client, "table.schedules", "berlin-close").await;
    let shown = js(
        &client,
        "return [new URLSearchParams(location.search).get('q'), \
                 document.querySelectorAll('table.schedules tbody tr').length];",
    )
    .await;
    assert_eq!(shown, serde_json::json!(["BERL", 1]), "only berlin-close");

    // The workflow page draws its DAG: a node per step, an edge per dependency.
    client
        .goto(&format!("{base}/ui/workflows/report"))
        .await
        .expect("workflow page");
    wait_text(&client, "#dag", "extract").await;
    let drawn = js(
        &client,
        "return [document.querySelectorAll('#dag g.node').length, \
                 document.querySelectorAll('#dag path.edge').length];",
    )
    .await;
    assert_eq!(drawn, serde_json::json!([2, 1]), "extract -> load");

    // A phone: the list as cards, the page exactly as wide as the screen.
    let phone_profile = tempfile::tempdir().expect("profile");
    let handheld = phone(driver, &phone_profile).await;
    handheld.goto(&format!("{base}/ui")).await.expect("list");
    sign_in(&handheld, DEPLOYER).await;
    wait_text(&handheld, "tr[data-schedule='nightly-report']", "paused").await;
    let widths = handheld
        .execute(
            "return [window.innerWidth, document.documentElement.scrollWidth];",
            vec![],
        )
        .await
        .expect("widths");
    assert_eq!(
        widths,
        json!([390, 390]),
        "no sideways scrolling on a phone"
    );
    shots.push(screenshot(&handheld, "list-phone.png").await);
    handheld.close().await.expect("close phone");

    // A reader: the same pages, no buttons.
    click(&client, "#forget").await;
    sign_in(&client, READER).await;
    wait_text(&client, "#role[data-role='reader']", "Read only").await;
    client
        .goto(&format!("{base}/ui/schedules/nightly-report"))
        .await
        .expect("schedule as reader");
    wait_text(&client, "#role[data-role='reader']", "Read only").await;
    wait_text(&client, "#runs tr.run", "manual").await;
    assert_eq!(count(&client, "#content button").await, 0);
    assert_eq!(count(&client, "#actions").await, 0);
    shots.push(screenshot(&client, "schedule-reader.png").await);

    client.close().await.expect("close browser");
    shots
}
