//! The schedule page (`/ui/schedules/{id}`) in a real browser: Debian's Chromium, headless,
//! driven through chromedriver against a real `kairos serve` with PostgreSQL and
//! nats-server (see `support/browser.rs`).
//!
//! Without auth the page asks for no token and its buttons work. With a deployer's token
//! (named `operator`): a next fire time is skipped with a note from its row (the API lists
//! the skip, the row says "skipped by operator: …") and taken back; a refused action is
//! shown next to its control; the pause form's until (UTC) pauses until that instant, which
//! the page's "Paused until …" line says; and the History tab opens on a click or from the
//! URL (`#history`), showing the skip and the pause with their actor.

use crate::browser;
use crate::support;

use std::time::Instant;

use browser::{
    browser, click, deploy_open, js, loads, schedule, sign_in, tokens_config, type_into, wait_text,
    Api, Driver, DEPLOYER, WAIT,
};
use chrono::{DurationRound, Utc};
use fantoccini::{Client, Locator};
use reqwest::Method;
use serde_json::{json, Value};
use support::Served;

/// `kairos serve --roles api` with a deployer and a reader token; the config's folder.
fn served_with_tokens(tag: &str) -> (Served, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = tokens_config(&dir);
    let mut served = Served::launch_with(
        "api",
        tag,
        kairos_testkit::NatsServer::start(),
        &["--config", config.to_str().expect("utf8 path")],
    );
    served.wait_for("/readyz", " 200 ");
    (served, dir)
}

/// Deploys workflow `report` and schedule `id` (`spec` in Europe/Berlin) as the deployer.
async fn seed(api: &Api, id: &str, spec: &str) {
    let dag = json!({"dag": {"nodes": [{"id": "a"}]}});
    api.call(Method::PUT, "/workflows/report/versions/1", Some(dag))
        .await;
    let body = schedule(id, spec, "Europe/Berlin", 0);
    api.call(Method::POST, "/schedules/upsert", Some(body))
        .await;
}

async fn displayed(client: &Client, css: &str) -> bool {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|err| panic!("{css}: {err}"))
        .is_displayed()
        .await
        .expect("displayed")
}

/// Waits until the page holds its refresh because a form is being edited (so no refresh in
/// flight can replace the page any more).
async fn refresh_held(client: &Client) {
    wait_text(client, "#refresh-state", "Paused").await;
}

/// With `auth.mode = none` (the default, loopback only) the page asks for no token: the
/// list shows at once and its buttons work.
#[test]
fn operator_page_without_auth() {
    let served = Served::start("api", "ui_open");
    let driver = Driver::start();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let base = format!("http://127.0.0.1:{}", served.port);
        let http = reqwest::Client::new();
        let open_report = schedule("open-report", "0 7 * * *", "Asia/Tokyo", 0);
        deploy_open(&http, &base, &[open_report]).await;
        let profile = tempfile::tempdir().expect("profile");
        let client = browser(&driver, &profile).await;
        client
            .goto(&format!("{base}/ui/schedules/open-report"))
            .await
            .expect("open");
        wait_text(&client, "#spec-words", "wall time in Asia/Tokyo").await;
        wait_text(&client, "#upcoming", "JST (Asia/Tokyo)").await;
        assert!(
            !client
                .find(Locator::Css("#token-panel"))
                .await
                .expect("token panel")
                .is_displayed()
                .await
                .expect("displayed"),
            "no token is asked for with auth.mode = none"
        );
        click(&client, "#pause-button").await;
        wait_text(&client, "#flash", "Paused open-report.").await;
        let got: Value = http
            .get(format!("{base}/schedules/open-report"))
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        assert_eq!(got["paused"], json!(true), "{got}");
        client.close().await.expect("close browser");
    });
}

/// Skip a next fire time with a note from its row, see it skipped (API and page) and in the
/// History tab with its actor, take it back; a take-back the API refuses (the skip is gone)
/// is shown in that row.
#[test]
fn skip_and_take_back_a_fire_time_in_chromium() {
    let (served, _config) = served_with_tokens("ui_skip");
    let driver = Driver::start();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let base = format!("http://127.0.0.1:{}", served.port);
        let api = Api {
            http: reqwest::Client::new(),
            base: base.clone(),
        };
        seed(&api, "hourly", "0 * * * *").await;
        let profile = tempfile::tempdir().expect("profile");
        let client = browser(&driver, &profile).await;
        client
            .goto(&format!("{base}/ui/schedules/hourly"))
            .await
            .expect("open");
        sign_in(&client, DEPLOYER).await;
        wait_text(&client, "#upcoming tbody tr", "UTC").await;
        // The third fire time: the first may pass while the test runs.
        let row_at = |n: usize| {
            let client = client.clone();
            async move {
                let css = format!("#upcoming tbody tr:nth-child({n})");
                let row = client.find(Locator::Css(&css)).await.expect("row");
                row.attr("data-run-at").await.expect("attr").expect("data-run-at")
            }
        };
        let at = row_at(3).await;
        let row = format!("#upcoming tr[data-run-at='{at}']");
        type_into(&client, &format!("{row} form.skip-form input[name=note]"), "db migration").await;
        click(&client, &format!("{row} button.skip-button")).await;
        wait_text(&client, "#flash", "Skipped the fire time").await;
        let skips = api.call(Method::GET, "/schedules/hourly/skips", None).await;
        assert_eq!(skips["skips"].as_array().map(Vec::len), Some(1), "{skips}");
        assert_eq!(skips["skips"][0]["run_at"], json!(at), "{skips}");
        assert_eq!(skips["skips"][0]["note"], json!("db migration"), "{skips}");
        assert_eq!(skips["skips"][0]["skipped_by"], json!("operator"), "{skips}");
        wait_text(&client, &format!("{row} .mark.skipped"), "skipped by operator: db migration").await;
        wait_text(&client, &format!("{row} button.unskip"), "Take back").await;
        assert_eq!(browser::count(&client, &format!("{row} form.skip-form")).await, 0);
        browser::screenshot(&client, "schedule-skipped.png").await;

        // The History tab: closed until clicked, then the skip with who and why.
        assert!(!displayed(&client, "#history").await, "History starts closed");
        click(&client, "#tab-history").await;
        let skipped = wait_text(&client, "#history-table tr", "db migration").await;
        let text = skipped.text().await.expect("text");
        assert!(text.contains("skip") && text.contains("operator"), "who skipped: {text}");
        assert!(!displayed(&client, "#overview").await, "one panel at a time");
        browser::screenshot(&client, "schedule-history.png").await;
        let selected = js(
            &client,
            "return [location.hash, document.getElementById('tab-history').getAttribute('aria-selected'), \
                     document.getElementById('tab-overview').getAttribute('aria-selected')];",
        )
        .await;
        assert_eq!(selected, json!(["#history", "true", "false"]));

        // Back to the fire times: take the skip back.
        click(&client, "#tab-overview").await;
        click(&client, &format!("{row} button.unskip")).await;
        wait_text(&client, "#flash", "Took back the skip").await;
        let skips = api.call(Method::GET, "/schedules/hourly/skips", None).await;
        assert_eq!(skips["skips"], json!([]), "{skips}");
        wait_text(&client, &format!("{row} button.skip-button"), "Skip").await;
        assert_eq!(browser::count(&client, &format!("{row} .mark.skipped")).await, 0);

        // Refused: the skip is taken back elsewhere before the button here is pressed.
        let at = row_at(4).await;
        let row = format!("#upcoming tr[data-run-at='{at}']");
        api.call(Method::POST, "/schedules/hourly/skips", Some(json!({"run_at": at})))
            .await;
        wait_text(&client, &format!("{row} button.unskip"), "Take back").await;
        let other = row_at(5).await;
        type_into(&client, &format!("#upcoming tr[data-run-at='{other}'] input[name=note]"), "x").await;
        refresh_held(&client).await;
        let path = format!("/schedules/hourly/skips/{at}");
        api.call(Method::DELETE, &path, None).await;
        click(&client, &format!("{row} button.unskip")).await;
        wait_text(&client, &format!("{row} td.skip-cell .problem[role=alert]"), "404 Not Found").await;

        // On a phone: the rows as cards, with their controls, and no sideways scrolling.
        browser::set_narrow_viewport(&client, 390, 844).await;
        client
            .goto(&format!("{base}/ui/schedules/hourly"))
            .await
            .expect("open");
        wait_text(&client, "#upcoming td.skip-cell", "Skip").await;
        let overflow = js(
            &client,
            "return [window.innerWidth, document.documentElement.scrollWidth];",
        )
        .await;
        assert_eq!(overflow, json!([390, 390]), "no sideways scrolling on a phone");
        js(&client, "document.getElementById('upcoming').scrollIntoView(); return null;").await;
        browser::screenshot(&client, "schedule-phone.png").await;
        client.close().await.expect("close browser");
    });
}

/// Pause until a UTC time from the pause form: a bad time is refused next to the form; a
/// good one pauses until that instant (API), which the page says in the schedule's zone and
/// in UTC with who and why; `#history` opens the History tab, which shows the pause and its
/// actor, and stays open across refreshes.
#[test]
fn pause_until_and_the_history_tab_in_chromium() {
    let (served, _config) = served_with_tokens("ui_until");
    let driver = Driver::start();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let base = format!("http://127.0.0.1:{}", served.port);
        let api = Api {
            http: reqwest::Client::new(),
            base: base.clone(),
        };
        seed(&api, "holiday", "0 7 * * *").await;
        let profile = tempfile::tempdir().expect("profile");
        let client = browser(&driver, &profile).await;
        client
            .goto(&format!("{base}/ui/schedules/holiday"))
            .await
            .expect("open");
        sign_in(&client, DEPLOYER).await;
        wait_text(&client, "#pause-form label[for=pause-until]", "(UTC, optional)").await;

        // Not a time: the API's problem, next to the form; nothing paused.
        type_into(&client, "#pause-until", "next tuesday").await;
        click(&client, "#pause-button").await;
        let problem = wait_text(&client, "#pause-form .problem[role=alert]", "400").await;
        let text = problem.text().await.expect("text");
        assert!(text.contains("until"), "names the field: {text}");
        let got = api.call(Method::GET, "/schedules/holiday", None).await;
        assert_eq!(got["paused"], json!(false), "{got}");

        // Two days ahead, typed as the label asks (UTC, to the minute).
        let until = (Utc::now() + chrono::Duration::days(2))
            .duration_trunc(chrono::Duration::minutes(1))
            .expect("minute");
        type_into(&client, "#pause-note", "vendor freeze").await;
        type_into(&client, "#pause-until", &until.format("%Y-%m-%d %H:%M").to_string()).await;
        click(&client, "#pause-button").await;
        let said = until.format("%Y-%m-%d %H:%M:%S UTC").to_string();
        wait_text(&client, "#flash", &format!("Paused holiday until {said}.")).await;
        let got = api.call(Method::GET, "/schedules/holiday", None).await;
        let rfc = until.format("%Y-%m-%dT%H:%M:%SZ").to_string();
        assert_eq!(got["paused"], json!(true), "{got}");
        assert_eq!(got["paused_until"], json!(rfc), "{got}");
        let line = wait_text(&client, "#pause-note-text", "Paused until").await;
        let text = line.text().await.expect("text");
        assert!(text.contains(&format!("(Europe/Berlin) = {said}, by")), "in UTC too: {text}");
        assert!(text.contains("(Europe/Berlin)"), "in the schedule's zone: {text}");
        assert!(text.contains(", by operator, because vendor freeze."), "{text}");
        let datetime = client
            .find(Locator::Css("#paused-until"))
            .await
            .expect("until")
            .attr("datetime")
            .await
            .expect("attr");
        assert_eq!(datetime, Some(rfc.clone()));
        wait_text(&client, "#pause-button", "Resume").await;
        browser::screenshot(&client, "schedule-paused-until.png").await;

        // A link to #history opens the History tab.
        client
            .goto(&format!("{base}/ui/schedules/holiday#history"))
            .await
            .expect("open history");
        let pause = wait_text(&client, "#history-table tr", "vendor freeze").await;
        let text = pause.text().await.expect("text");
        assert!(text.contains("pause") && text.contains("operator"), "{text}");
        assert!(text.contains(&rfc) || text.contains(&said), "the until: {text}");
        assert!(!displayed(&client, "#overview").await);
        wait_text(&client, "#tab-history[aria-selected=true]", "History").await;
        // It stays open across refreshes.
        let before = loads(&client).await;
        let after = json!({"cron_expr": "0 7 * * *", "timezone": "Europe/Berlin", "after": rfc, "count": 1});
        let next = api.call(Method::POST, "/schedules/preview", Some(after)).await;
        let skip = json!({"run_at": next["fire_times"][0], "note": "after the freeze"});
        api.call(Method::POST, "/schedules/holiday/skips", Some(skip)).await;
        let deadline = Instant::now() + WAIT;
        while loads(&client).await <= before {
            assert!(Instant::now() < deadline, "no refresh");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        wait_text(&client, "#history-table tr", "after the freeze").await;
        assert!(displayed(&client, "#history").await, "still open after a refresh");
        client.close().await.expect("close browser");
    });
}
