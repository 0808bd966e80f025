//! Words that must stay whole on the operator page, in a real browser: Debian's Chromium,
//! headless, driven through chromedriver against a real `kairos serve` (every role) with
//! PostgreSQL and nats-server (see `support/browser.rs`).
//!
//! Schedule ids, executor ids, run keys, time zones, cron specs and times are never broken
//! across lines, at 1280 px and on a 390 px phone, on the schedules list, a schedule's page,
//! the runs page and a run's page: the layout makes room instead (a table scrolls sideways
//! in its own box, the page itself never does). The check runs in the page: every
//! occurrence of such a word in the visible text, as a DOM range, must lie on one line.
//!
//! Also the runs pages' details: the launch message is one preformatted block, "1
//! dependency" is singular, and the time fields' placeholders are RFC 3339 times near now.

use crate::browser;
use crate::support;

use browser::{
    browser, click, deploy_open, js, report, schedule, screenshot, set_narrow_viewport,
    set_viewport, trigger, wait_status, wait_text, Driver,
};
use fantoccini::Client;
use serde_json::{json, Value};
use support::Served;

/// A schedule id as long as ids come, with hyphens and underscores where a browser could
/// break it by itself.
const LONG_ID: &str = "finance-eu-west_consolidated-ledger_nightly-reconciliation-report-v2";
/// A long time zone name.
const LONG_ZONE: &str = "America/Argentina/ComodRivadavia";
/// A cron spec with spaces, slashes and ranges.
const SPEC: &str = "*/5 9-17 * * MON-FRI";
/// A paused schedule in another long zone.
const PAUSED_ID: &str = "paused-north-dakota-close";
const PAUSED_ZONE: &str = "America/North_Dakota/New_Salem";
const PAUSED_SPEC: &str = "30 17 * * 1-5";
/// A long executor id.
const EXECUTOR: &str = "executor-pool-eu-west-1-host-0042-worker-17";

/// In the page: each occurrence of the words in `arguments[0]` and of every time (as
/// `2026-03-09 07:00:00 UTC`, counted under `times`) in the visible text of `#content`, as
/// a range, and how many lines it spans. Answers `{found: {word: count}, broken: ["word: n
/// lines"], overflow: page width past the window}`.
const UNBROKEN: &str = r"
    var words = arguments[0];
    var times = /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? [A-Z0-9+-]+/g;
    function hidden(el) {
        for (; el && el !== document.body; el = el.parentElement) {
            var r = el.getBoundingClientRect();
            if (r.width <= 1 || r.height <= 1) { return true; }
        }
        return false;
    }
    function lines(node, start, end) {
        var range = document.createRange();
        range.setStart(node, start);
        range.setEnd(node, end);
        var tops = {};
        Array.from(range.getClientRects()).forEach(function (r) {
            if (r.width > 0) { tops[Math.round(r.top)] = true; }
        });
        return Object.keys(tops).length;
    }
    var found = {}, broken = [];
    words.forEach(function (w) { found[w] = 0; });
    var walker = document.createTreeWalker(document.getElementById('content'), NodeFilter.SHOW_TEXT);
    for (var node = walker.nextNode(); node; node = walker.nextNode()) {
        if (hidden(node.parentElement)) { continue; }
        var text = node.textContent;
        var spans = [];
        words.forEach(function (w) {
            for (var at = text.indexOf(w); at >= 0; at = text.indexOf(w, at + 1)) {
                spans.push([w, at, at + w.length]);
            }
        });
        var m;
        times.lastIndex = 0;
        while ((m = times.exec(text)) !== null) { spans.push(['times', m.index, m.index + m[0].length, m[0]]); }
        spans.forEach(function (s) {
            var n = lines(node, s[1], s[2]);
            if (n === 0) { return; }
            found[s[0]] = (found[s[0]] || 0) + 1;
            if (n > 1) { broken.push((s[3] || s[0]) + ': ' + n + ' lines'); }
        });
    }
    return {found: found, broken: broken,
            overflow: document.documentElement.scrollWidth - window.innerWidth};";

/// Checks the page `client` shows: each of `words` (and a time at least, with `times`) is
/// seen at least once and none is broken across lines, and the page is no wider than the
/// window. `what` names the page.
async fn check(client: &Client, what: &str, words: &[&str], times: bool) {
    let seen: Value = client
        .execute(UNBROKEN, vec![json!(words)])
        .await
        .expect("check script");
    for word in words {
        assert!(
            seen["found"][word].as_u64().unwrap_or(0) > 0,
            "{what}: {word:?} is not on the page: {seen}"
        );
    }
    if times {
        assert!(
            seen["found"]["times"].as_u64().unwrap_or(0) > 0,
            "{what}: no time on the page: {seen}"
        );
    }
    assert_eq!(
        seen["broken"],
        json!([]),
        "{what}: words broken across lines"
    );
    assert_eq!(
        seen["overflow"],
        json!(0),
        "{what}: the page is wider than the window"
    );
}

#[test]
fn ids_zones_specs_and_times_stay_whole_in_chromium() {
    let served = Served::start("api,planner,dispatcher,status", "ui_unbroken");
    let driver = Driver::start();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let base = format!("http://127.0.0.1:{}", served.port);
        let http = reqwest::Client::new();
        deploy_open(
            &http,
            &base,
            &[
                schedule(LONG_ID, SPEC, LONG_ZONE, 0),
                schedule(PAUSED_ID, PAUSED_SPEC, PAUSED_ZONE, 0),
                schedule("quarter-hour", "*/15 * * * *", "UTC", 0),
            ],
        )
        .await;
        // A workflow of two steps, one waiting for the other.
        let answer = http
            .put(format!("{base}/workflows/chain/versions/1"))
            .json(&json!({"dag": {"nodes": [{"id": "a"}, {"id": "b", "depends_on": ["a"]}]}}))
            .send()
            .await
            .expect("deploy");
        assert!(answer.status().is_success(), "deploy: {}", answer.status());
        let answer = http
            .post(format!("{base}/schedules/pause"))
            .json(&json!({"schedule_id": PAUSED_ID, "paused": true, "note": "quarter close"}))
            .send()
            .await
            .expect("pause");
        assert!(answer.status().is_success(), "pause: {}", answer.status());
        let key = trigger(&http, &base, LONG_ID, "unbroken").await;
        wait_status(&http, &base, &key, "ENQUEUED").await;
        report(
            &http,
            &base,
            &key,
            json!({"status": "STARTED", "executor_id": EXECUTOR}),
        )
        .await;
        report(
            &http,
            &base,
            &key,
            json!({"status": "SUCCESS", "executor_id": EXECUTOR}),
        )
        .await;

        let profile = tempfile::tempdir().expect("profile");
        let client = browser(&driver, &profile).await;
        set_viewport(&client, 1280, 800).await;
        pages(&client, &base, &key, "1280").await;

        // The launch message is one block: its code is not a run of inline boxes.
        let launch = js(
            &client,
            "var c = document.querySelector('#launch-message code');
             return [getComputedStyle(c).display, c.getClientRects().length];",
        )
        .await;
        assert_eq!(launch, json!(["block", 1]), "the launch message");
        js(
            &client,
            "document.getElementById('launch-message').scrollIntoView(); return null;",
        )
        .await;
        screenshot(&client, "unbroken-launch-1280.png").await;

        // The time fields' placeholders: RFC 3339, within a week of now.
        client
            .goto(&format!("{base}/ui/schedules/{LONG_ID}"))
            .await
            .expect("schedule");
        wait_text(&client, "#schedule-id", LONG_ID).await;
        let now = chrono::Utc::now();
        for css in ["#pause-until", "#backfill-from", "#backfill-to"] {
            let shown = js(
                &client,
                &format!("return document.querySelector('{css}').placeholder;"),
            )
            .await;
            let shown = shown.as_str().expect("placeholder");
            let at = chrono::DateTime::parse_from_rfc3339(shown)
                .unwrap_or_else(|err| panic!("{css} placeholder {shown:?}: {err}"));
            assert!(shown.ends_with('Z'), "{css}: {shown} in UTC");
            let off = (at.with_timezone(&chrono::Utc) - now).num_hours().abs();
            assert!(off <= 7 * 24, "{css}: {shown} is not near now ({now})");
        }

        // One node and one dependency are each one.
        client
            .goto(&format!("{base}/ui/workflows/report"))
            .await
            .expect("workflow");
        wait_text(&client, "#dag-title", "DAG of version 1").await;
        wait_text(&client, "section.dag p.muted", "1 node, 0 dependencies;").await;
        client
            .goto(&format!("{base}/ui/workflows/chain"))
            .await
            .expect("workflow");
        wait_text(&client, "#dag-title", "DAG of version 1").await;
        wait_text(&client, "section.dag p.muted", "2 nodes, 1 dependency;").await;

        set_narrow_viewport(&client, 390, 844).await;
        let width = js(&client, "return window.innerWidth;").await;
        assert_eq!(width, json!(390), "the window could not be made phone-wide");
        pages(&client, &base, &key, "390").await;
        client.close().await.expect("close browser");
    });
}

/// The list, both schedules' pages, the runs page and the run's page, each checked and
/// screenshot (`unbroken-<page>-<width>.png`).
async fn pages(client: &Client, base: &str, key: &str, width: &str) {
    client.goto(&format!("{base}/ui")).await.expect("list");
    wait_text(client, "table.schedules", LONG_ID).await;
    let list = [
        LONG_ID,
        LONG_ZONE,
        SPEC,
        PAUSED_ID,
        PAUSED_ZONE,
        PAUSED_SPEC,
        "paused",
    ];
    check(client, &format!("list at {width} px"), &list, true).await;
    screenshot(client, &format!("unbroken-list-{width}.png")).await;

    client
        .goto(&format!("{base}/ui/schedules/{LONG_ID}"))
        .await
        .expect("schedule");
    wait_text(client, "#runs tr.run", "SUCCESS").await;
    let words = [LONG_ID, LONG_ZONE];
    check(client, &format!("schedule at {width} px"), &words, true).await;
    screenshot(client, &format!("unbroken-schedule-{width}.png")).await;
    click(client, "#tab-all-fields").await;
    wait_text(client, "#fields", SPEC).await;
    let words = [SPEC, LONG_ZONE];
    check(
        client,
        &format!("schedule fields at {width} px"),
        &words,
        true,
    )
    .await;
    screenshot(client, &format!("unbroken-fields-{width}.png")).await;

    client
        .goto(&format!("{base}/ui/schedules/{PAUSED_ID}"))
        .await
        .expect("paused schedule");
    wait_text(client, "#schedule-id", PAUSED_ID).await;
    let words = [PAUSED_ID, PAUSED_ZONE, "paused"];
    check(
        client,
        &format!("paused schedule at {width} px"),
        &words,
        true,
    )
    .await;

    client.goto(&format!("{base}/ui/runs")).await.expect("runs");
    wait_text(
        client,
        &format!("#runs tr.run[data-key='{key}']"),
        "SUCCESS",
    )
    .await;
    let words = [LONG_ID, EXECUTOR];
    check(client, &format!("runs at {width} px"), &words, true).await;
    screenshot(client, &format!("unbroken-runs-{width}.png")).await;

    client
        .goto(&format!("{base}/ui/runs/{key}"))
        .await
        .expect("run");
    wait_text(client, "#run-key", key).await;
    wait_text(client, "#launch-message", "idempotency_key").await;
    let words = [key, LONG_ID, EXECUTOR];
    check(client, &format!("run at {width} px"), &words, true).await;
    screenshot(client, &format!("unbroken-run-{width}.png")).await;
}
