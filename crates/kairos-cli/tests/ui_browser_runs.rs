//! The runs pages (`/ui/runs`, its views, and one run at `/ui/runs/{key}`) in a real browser:
//! Debian's Chromium, headless, driven through chromedriver against a real `kairos serve`
//! (every role) with PostgreSQL and nats-server (see `support/browser.rs`); with them the
//! refresh, the not-found pages, delete, and the layout at 1280 px and on a phone.

use crate::browser;
use crate::support;

use std::time::{Duration, Instant};

use browser::{
    browser, click, count, deploy_open, js, loads, report, schedule, screenshot,
    set_narrow_viewport, set_viewport, trigger, type_into, wait_status, wait_text, Driver, WAIT,
};
use fantoccini::Locator;
use serde_json::json;
use support::Served;

/// A table wider than its box (an id is never broken to make it fit) scrolls sideways in
/// it, the page itself never does, and every action button is in view inside the table's
/// box (none cut off to the right): `[buttons past the edge, page overflow, buttons]`.
const OVERFLOW: &str = "
    var cut = Array.from(document.querySelectorAll('td.actions-cell button')).filter(function (b) {
        var wrap = b.closest('.table-wrap').getBoundingClientRect();
        var r = b.getBoundingClientRect();
        return r.right > wrap.right + 1 || r.left < wrap.left - 1 || r.right > window.innerWidth;
    }).length;
    return [cut, document.documentElement.scrollWidth - window.innerWidth,
            document.querySelectorAll('td.actions-cell button').length];";

/// A schedule id as long as ids come, with no place a browser would break it by itself.
const LONG_ID: &str = "finance_eu_west_consolidated_ledger_nightly_reconciliation_report_v2";

/// The run page, the refresh (and its pause while a form is edited), fired runs apart from
/// upcoming ticks, not-found pages, delete with confirmation, retry of a failed run, times
/// said once, and the runs table at 1280 px and at phone width, in Chromium.
#[test]
fn run_page_refresh_delete_and_layout_in_chromium() {
    let served = Served::start("api,planner,dispatcher,status", "ui_run");
    let driver = Driver::start();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let base = format!("http://127.0.0.1:{}", served.port);
        let http = reqwest::Client::new();
        let schedules = [
            schedule("nightly", "0 7 * * *", "UTC", 0),
            schedule("every-five", "*/5 * * * * *", "UTC", 0),
            schedule(LONG_ID, "0 9 * * *", "UTC", 0),
        ];
        deploy_open(&http, &base, &schedules).await;
        let trigger_of = |id: &'static str, request: &'static str| trigger(&http, &base, id, request);
        let trigger = |request: &'static str| trigger_of("nightly", request);
        let key = trigger("first").await;
        wait_status(&http, &base, &key, "ENQUEUED").await;
        // A run cancelled with a long unbroken reason, to stretch the table.
        let long = trigger("long").await;
        let answer = http
            .post(format!("{base}/runs/{long}/cancel"))
            .json(&json!({"reason": format!("reason-{}", "x".repeat(300))}))
            .send()
            .await
            .expect("cancel");
        assert!(answer.status().is_success());

        // A run that started and failed on an executor with a long name: dead-lettered,
        // with start and end times, a long error and a retry button.
        let dead = trigger_of(LONG_ID, "dead").await;
        wait_status(&http, &base, &dead, "ENQUEUED").await;
        let executor = "executor-pool-eu-west-1-host-0042-worker-17";
        report(
            &http,
            &base,
            &dead,
            json!({"status": "STARTED", "executor_id": executor}),
        )
        .await;
        let error = format!("step load failed: {}", "connection refused; ".repeat(12));
        report(
            &http,
            &base,
            &dead,
            json!({"status": "FAILED", "executor_id": executor, "error": error}),
        )
        .await;

        let profile = tempfile::tempdir().expect("profile");
        let client = browser(&driver, &profile).await;
        set_viewport(&client, 1280, 800).await;

        // Fired runs by default, upcoming ticks apart.
        client.goto(&format!("{base}/ui/runs")).await.expect("runs");
        wait_text(&client, "#runs tr.run", "every-five").await;
        let future =
            "var now = Date.now(); return Array.from(document.querySelectorAll('#runs tr.run'))
            .filter(function (r) { return Date.parse(r.dataset.fireAt) > now + 1000; }).length;";
        assert_eq!(
            js(&client, future).await,
            json!(0),
            "no future tick among fired runs"
        );
        click(&client, "#run-views a[data-view='upcoming']").await;
        wait_text(&client, "#view-note", "still to come").await;
        wait_text(&client, "#runs tr.run[data-status='PENDING']", "every-five").await;
        let past =
            "var now = Date.now(); return Array.from(document.querySelectorAll('#runs tr.run'))
            .filter(function (r) { return Date.parse(r.dataset.fireAt) < now - 6000; }).length;";
        assert_eq!(
            js(&client, past).await,
            json!(0),
            "no fired run among upcoming ticks"
        );

        // A schedule's page keeps them apart too; its times are said once.
        client
            .goto(&format!("{base}/ui/schedules/every-five"))
            .await
            .expect("schedule");
        wait_text(&client, "#planned-runs li", "PENDING").await;
        wait_text(&client, "#runs tr.run", "ENQUEUED").await;
        assert_eq!(
            js(&client, future).await,
            json!(0),
            "no future tick in its runs"
        );
        let text = js(&client, "return document.body.innerText;").await;
        let text = text.as_str().expect("text");
        assert!(
            text.contains(" UTC") && !text.contains("UTC (UTC)"),
            "{text}"
        );

        // The last day in charts: the failed run is a red bar; it was triggered, not a
        // planned tick, so it has no drift dot (drift is kairos_fire_drift_seconds's).
        client
            .goto(&format!("{base}/ui/schedules/{LONG_ID}"))
            .await
            .expect("schedule");
        wait_text(&client, "#outcomes-chart figcaption", "1 failed").await;
        assert_eq!(count(&client, "#outcomes-chart svg rect.bar-failed").await, 1);
        assert_eq!(count(&client, "#outcomes-chart svg rect.bar-success").await, 0);
        assert_eq!(count(&client, "#drift-chart svg circle.dot").await, 0);
        wait_text(&client, "#drift-chart figcaption", "no scheduled tick published").await;
        let drawn = js(
            &client,
            "return document.querySelector('#outcomes-chart rect.bar-failed').getBoundingClientRect().height;",
        )
        .await;
        assert!(drawn.as_f64().expect("height") > 10.0, "the bar is drawn: {drawn}");
        // Said once: a UTC schedule's next ticks have no second, identical column (#, UTC,
        // fires at, note, and the deployer's Skip).
        let columns = js(
            &client,
            "return Array.from(document.querySelectorAll('#upcoming thead th')).map(function (th) { return th.textContent; });",
        )
        .await;
        assert_eq!(
            columns,
            json!(["#", "Tick (UTC)", "Fires at (UTC, with jitter)", "Note", "Skip"])
        );
        js(&client, "document.getElementById('charts').scrollIntoView(); return null;").await;
        screenshot(&client, "schedule-charts.png").await;

        // Layout at 1280 px: the actions column fits, nothing cut off.
        client
            .goto(&format!("{base}/ui/runs?view=recent"))
            .await
            .expect("runs");
        wait_text(
            &client,
            &format!("#runs tr.run[data-key='{long}']"),
            "reason-xxx",
        )
        .await;
        wait_text(&client, "#runs td.actions-cell", "Cancel").await;
        wait_text(
            &client,
            &format!("#runs tr.run[data-key='{dead}']"),
            "Retry",
        )
        .await;
        let fit = js(&client, OVERFLOW).await;
        assert_eq!(
            &fit.as_array().expect("array")[..2],
            &[json!(0), json!(0)],
            "1280 px: {fit}"
        );
        screenshot(&client, "runs-1280.png").await;
        client
            .goto(&format!("{base}/ui/runs?view=dead_letters"))
            .await
            .expect("dead letters");
        wait_text(
            &client,
            &format!("#runs tr.run[data-key='{dead}']"),
            "Retry",
        )
        .await;
        let fit = js(&client, OVERFLOW).await;
        assert_eq!(
            &fit.as_array().expect("array")[..2],
            &[json!(0), json!(0)],
            "1280 px, dead letters: {fit}"
        );

        // The run page: opened from its link; the refresh shows what the executor reports.
        client
            .goto(&format!("{base}/ui/runs?schedule_id=nightly"))
            .await
            .expect("runs of nightly");
        click(&client, &format!("tr.run[data-key='{key}'] a.run-link")).await;
        wait_text(&client, "#run-key", &key).await;
        wait_text(&client, "#run-status", "ENQUEUED").await;
        wait_text(&client, "#timeline", "Attempt 1 published").await;
        let before = loads(&client).await;
        report(
            &http,
            &base,
            &key,
            json!({"status": "STARTED", "executor_id": "exec-ui"}),
        )
        .await;
        wait_text(&client, "#run-status", "STARTED").await;
        wait_text(&client, "#run-executor", "exec-ui").await;
        assert!(
            loads(&client).await > before,
            "shown by a refresh, not a navigation"
        );
        report(
            &http,
            &base,
            &key,
            json!({"status": "FAILED", "executor_id": "exec-ui", "error": "exit 3: disk full"}),
        )
        .await;
        wait_text(
            &client,
            "#attempts tr.attempt[data-attempt='1']",
            "exit 3: disk full",
        )
        .await;
        wait_text(&client, "#run-actions button.retry", "Retry").await;
        screenshot(&client, "run.png").await;
        click(&client, "#run-actions button.retry").await;
        wait_text(&client, "#flash", "Retry of run").await;
        let link = client
            .find(Locator::Css("#flash-run"))
            .await
            .expect("the flash links the run")
            .attr("href")
            .await
            .expect("href");
        assert_eq!(link, Some(format!("/ui/runs/{key}")));
        wait_text(&client, "#attempts", "exit 3: disk full").await;
        wait_text(&client, "#run-attempt", "2").await;

        // The refresh holds while a form is being edited.
        client
            .goto(&format!("{base}/ui/schedules/nightly"))
            .await
            .expect("schedule");
        wait_text(&client, "#runs tr.run", "manual").await;
        let shown = count(&client, "#runs tr.run").await;
        type_into(&client, "#pause-note", "typing").await;
        let held = loads(&client).await;
        let third = trigger("third").await;
        tokio::time::sleep(Duration::from_secs(12)).await;
        assert_eq!(
            loads(&client).await,
            held,
            "no refresh while a field is edited"
        );
        assert_eq!(count(&client, "#runs tr.run").await, shown);
        wait_text(&client, "#refresh-state", "Paused").await;
        let typed = js(
            &client,
            "return document.getElementById('pause-note').value;",
        )
        .await;
        assert_eq!(typed, json!("typing"), "what was typed is kept");
        // Done editing (the field left, the form sent): the refresh goes on.
        click(&client, "#pause-button").await;
        wait_text(&client, "#flash", "Paused nightly.").await;
        // The sent form was replaced by the reloaded page: no field has focus any more.
        let focus = js(&client, "return document.activeElement.tagName;").await;
        assert_ne!(focus, json!("INPUT"), "{focus}");
        wait_text(
            &client,
            &format!("#runs tr.run[data-key='{third}']"),
            "manual",
        )
        .await;
        let resumed = loads(&client).await;
        let deadline = Instant::now() + WAIT;
        while loads(&client).await <= resumed {
            assert!(Instant::now() < deadline, "the refresh never resumed");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        // Not found: a styled page saying what is missing.
        client
            .goto(&format!("{base}/ui/schedules/no-such"))
            .await
            .expect("unknown");
        wait_text(&client, "#not-found h1", "Not found").await;
        wait_text(
            &client,
            "#not-found-lead",
            "There is no schedule \u{201c}no-such\u{201d}",
        )
        .await;
        client
            .goto(&format!("{base}/ui/runs/{}", "0".repeat(64)))
            .await
            .expect("unknown run");
        wait_text(&client, "#not-found-lead", "There is no run").await;

        // Delete, with a confirmation that can be dismissed.
        client
            .goto(&format!("{base}/ui/schedules/nightly"))
            .await
            .expect("schedule");
        wait_text(&client, "#delete-button", "Delete schedule").await;
        click(&client, "#delete-button").await;
        wait_text(&client, "#delete-form:not([hidden])", "cannot be undone").await;
        click(&client, "#delete-dismiss").await;
        assert_eq!(count(&client, "#delete-form:not([hidden])").await, 0);
        let kept = http
            .get(format!("{base}/schedules/nightly"))
            .send()
            .await
            .expect("get");
        assert_eq!(
            kept.status(),
            reqwest::StatusCode::OK,
            "dismissed: not deleted"
        );
        click(&client, "#delete-button").await;
        click(&client, "#delete-confirm").await;
        wait_text(&client, "#flash", "Deleted schedule nightly.").await;
        wait_text(&client, "#content h1", "Schedules").await;
        let gone = http
            .get(format!("{base}/schedules/nightly"))
            .send()
            .await
            .expect("get");
        assert_eq!(gone.status(), reqwest::StatusCode::NOT_FOUND);
        // The runs stay; their link to the schedule lands on the not-found page.
        client
            .goto(&format!("{base}/ui/runs?key={key}"))
            .await
            .expect("run");
        wait_text(&client, "#schedule-gone", "deleted").await;
        click(&client, "#run-schedule").await;
        wait_text(
            &client,
            "#not-found-lead",
            "There is no schedule \u{201c}nightly\u{201d}. It was deleted",
        )
        .await;
        screenshot(&client, "not-found.png").await;

        // A phone-wide window, set through the WebDriver session: no sideways overflow.
        set_narrow_viewport(&client, 390, 844).await;
        let width = js(&client, "return window.innerWidth;").await;
        assert_eq!(width, json!(390), "the window could not be made phone-wide");
        client.goto(&format!("{base}/ui/runs")).await.expect("runs");
        wait_text(&client, "#runs td.actions-cell", "Cancel").await;
        let fit = js(&client, OVERFLOW).await;
        assert_eq!(
            &fit.as_array().expect("array")[..2],
            &[json!(0), json!(0)],
            "390 px: {fit}"
        );
        screenshot(&client, "runs-phone.png").await;
        client.close().await.expect("close browser");
    });
}
