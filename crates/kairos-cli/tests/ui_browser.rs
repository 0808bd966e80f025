//! The operator page (`/ui`) in a real browser: Debian's Chromium, headless, driven through
//! chromedriver against a real `kairos serve` (every role) with PostgreSQL and nats-server,
//! in `auth.mode = tokens` with a deployer and a reader token.
//!
//! A deployer opens the list, finds a schedule and its next fire time, opens it, pauses it
//! (seen paused through the API), triggers it (the run appears on the page), previews and
//! runs a backfill, sees the Runs page and its in-flight view, and the list on a 390x844
//! phone screen; a reader sees no buttons; a bad token is shown as a 401. Screenshots of each page
//! are saved under `<CARGO_TARGET_TMPDIR>/ui-screenshots/`.
//!
//! If Chromium or chromedriver is missing or cannot start, the test fails: `.ci/run`
//! installs both.

#[path = "support/browser.rs"]
mod browser;
mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use browser::{
    browser, count, phone, screenshot, set_narrow_viewport, set_viewport, sign_in, wait_text,
    Driver, WAIT,
};
use fantoccini::Locator;
use serde_json::{json, Value};
use support::{sha256_hex, Served};

const DEPLOYER: &str = "ui-deployer-secret";
const READER: &str = "ui-reader-secret";

/// The config file of the served instance: static tokens for a deployer and a reader.
fn tokens_config(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("kairos.toml");
    let text = format!(
        "[auth]\nmode = \"tokens\"\n\n[[auth.tokens]]\nname = \"operator\"\nrole = \"deployer\"\n\
         sha256 = \"{}\"\n\n[[auth.tokens]]\nname = \"viewer\"\nrole = \"reader\"\nsha256 = \"{}\"\n",
        sha256_hex(DEPLOYER),
        sha256_hex(READER)
    );
    std::fs::write(&path, text).expect("write config");
    path
}

/// The API as a client sees it, with the deployer token.
struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(DEPLOYER);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await.expect("api request");
        let status = answer.status();
        let text = answer.text().await.expect("api answer");
        assert!(status.is_success(), "{path}: {status} {text}");
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).expect("json")
        }
    }
}

fn schedule(id: &str, spec: &str, zone: &str, jitter_ms: u32) -> Value {
    json!({
        "schedule_id": id, "workflow_id": "report", "version": 1, "user_id": "alice",
        "cron_expr": spec, "timezone": zone, "jitter_ms": jitter_ms,
        "overlap_policy": "allow", "catchup_policy": "none"
    })
}

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
        let answer = http
            .put(format!("{base}/workflows/report/versions/1"))
            .json(&json!({"dag": {"nodes": [{"id": "a"}]}}))
            .send()
            .await
            .expect("deploy");
        assert_eq!(answer.status(), reqwest::StatusCode::CREATED);
        let answer = http
            .post(format!("{base}/schedules/upsert"))
            .json(&schedule("open-report", "0 7 * * *", "Asia/Tokyo", 0))
            .send()
            .await
            .expect("upsert");
        assert_eq!(answer.status(), reqwest::StatusCode::CREATED);
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
        client
            .find(Locator::Css("#pause-button"))
            .await
            .expect("pause button")
            .click()
            .await
            .expect("pause");
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
    client
        .find(Locator::Css("#pause-note"))
        .await
        .expect("pause note field")
        .send_keys("holiday freeze")
        .await
        .expect("type note");
    client
        .find(Locator::Css("#pause-button"))
        .await
        .expect("pause button")
        .click()
        .await
        .expect("pause");
    wait_text(&client, "#flash", "Paused nightly-report.").await;
    let got = api
        .call(Method::GET, "/schedules/nightly-report", None)
        .await;
    assert_eq!(got["paused"], json!(true), "{got}");
    assert_eq!(got["pause_note"], json!("holiday freeze"), "{got}");
    wait_text(&client, "#pause-button", "Resume").await;
    wait_text(&client, "#pause-note-text", "holiday freeze").await;

    // Trigger: the run shows up in the page's run table.
    client
        .find(Locator::Css("#trigger-button"))
        .await
        .expect("trigger button")
        .click()
        .await
        .expect("trigger");
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
    client
        .find(Locator::Css("#backfill-preview"))
        .await
        .expect("preview button")
        .click()
        .await
        .expect("preview");
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
    client
        .find(Locator::Css("#backfill-confirm"))
        .await
        .expect("confirm")
        .click()
        .await
        .expect("confirm backfill");
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
    client
        .find(Locator::Css("#cancel-reason"))
        .await
        .expect("reason")
        .send_keys("test run")
        .await
        .expect("type reason");
    client
        .find(Locator::Css("#cancel-confirm"))
        .await
        .expect("confirm cancel")
        .click()
        .await
        .expect("confirm cancel");
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
    client
        .find(Locator::Css("#forget"))
        .await
        .expect("forget")
        .click()
        .await
        .expect("forget token");
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

/// Runs `script` in the page; its answer.
async fn js(client: &fantoccini::Client, script: &str) -> Value {
    client.execute(script, vec![]).await.expect("script")
}

/// How many times the page has loaded its fragment (the refresh counts).
async fn loads(client: &fantoccini::Client) -> u64 {
    js(
        client,
        "return Number(document.getElementById('content').dataset.loads || '0');",
    )
    .await
    .as_u64()
    .expect("loads")
}

/// Waits until the API shows run `key` in `status`.
async fn wait_status(http: &reqwest::Client, base: &str, key: &str, status: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let run: Value = http
            .get(format!("{base}/runs/{key}"))
            .send()
            .await
            .expect("get run")
            .json()
            .await
            .expect("json");
        if run["status"] == json!(status) {
            return;
        }
        assert!(Instant::now() < deadline, "run {key} never {status}: {run}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn report(http: &reqwest::Client, base: &str, key: &str, body: Value) {
    let answer = http
        .post(format!("{base}/runs/{key}/status"))
        .json(&body)
        .send()
        .await
        .expect("report");
    assert!(
        answer.status().is_success(),
        "{}",
        answer.text().await.unwrap_or_default()
    );
}

async fn click(client: &fantoccini::Client, css: &str) {
    // Waits for the element: the page may still be loading its fragment.
    let deadline = Instant::now() + WAIT;
    loop {
        match client.find(Locator::Css(css)).await {
            Ok(element) => {
                element
                    .click()
                    .await
                    .unwrap_or_else(|err| panic!("click {css}: {err}"));
                return;
            }
            Err(err) => assert!(Instant::now() < deadline, "no {css} within {WAIT:?}: {err}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every table on the page fits its box, and every action button is inside it (none cut
/// off to the right): `[overflowing tables, buttons past the edge, page overflow]`.
const OVERFLOW: &str = "
    var wraps = Array.from(document.querySelectorAll('.table-wrap'));
    var over = wraps.filter(function (w) { return w.scrollWidth > w.clientWidth + 1; }).length;
    var cut = Array.from(document.querySelectorAll('td.actions-cell button')).filter(function (b) {
        var wrap = b.closest('.table-wrap').getBoundingClientRect();
        var r = b.getBoundingClientRect();
        return r.right > wrap.right + 1 || r.right > window.innerWidth;
    }).length;
    return [over, cut, document.documentElement.scrollWidth - window.innerWidth,
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
        let answer = http
            .put(format!("{base}/workflows/report/versions/1"))
            .json(&json!({"dag": {"nodes": [{"id": "a"}]}}))
            .send()
            .await
            .expect("deploy");
        assert_eq!(answer.status(), reqwest::StatusCode::CREATED);
        for body in [
            schedule("nightly", "0 7 * * *", "UTC", 0),
            schedule("every-five", "*/5 * * * * *", "UTC", 0),
            schedule(LONG_ID, "0 9 * * *", "UTC", 0),
        ] {
            let answer = http
                .post(format!("{base}/schedules/upsert"))
                .json(&body)
                .send()
                .await
                .expect("upsert");
            assert_eq!(answer.status(), reqwest::StatusCode::CREATED);
        }
        let trigger_of = |id: &'static str, request: &'static str| {
            let (http, base) = (http.clone(), base.clone());
            async move {
                let run: Value = http
                    .post(format!("{base}/schedules/{id}/trigger"))
                    .json(&json!({"request_id": request}))
                    .send()
                    .await
                    .expect("trigger")
                    .json()
                    .await
                    .expect("json");
                run["idempotency_key"].as_str().expect("key").to_string()
            }
        };
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

        // The last day in charts: the failed run is a red bar, its publish a drift dot.
        client
            .goto(&format!("{base}/ui/schedules/{LONG_ID}"))
            .await
            .expect("schedule");
        wait_text(&client, "#outcomes-chart figcaption", "1 failed").await;
        assert_eq!(count(&client, "#outcomes-chart svg rect.bar-failed").await, 1);
        assert_eq!(count(&client, "#outcomes-chart svg rect.bar-success").await, 0);
        assert_eq!(count(&client, "#drift-chart svg circle.dot").await, 1);
        let drawn = js(
            &client,
            "return document.querySelector('#outcomes-chart rect.bar-failed').getBoundingClientRect().height;",
        )
        .await;
        assert!(drawn.as_f64().expect("height") > 10.0, "the bar is drawn: {drawn}");
        // Said once: a UTC schedule's next ticks have no second, identical column.
        assert_eq!(count(&client, "#upcoming thead th").await, 4);
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
            &fit.as_array().expect("array")[..3],
            &[json!(0), json!(0), json!(0)],
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
            &fit.as_array().expect("array")[..3],
            &[json!(0), json!(0), json!(0)],
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
        client
            .find(Locator::Css("#pause-note"))
            .await
            .expect("note")
            .send_keys("typing")
            .await
            .expect("type");
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
            &fit.as_array().expect("array")[..3],
            &[json!(0), json!(0), json!(0)],
            "390 px: {fit}"
        );
        screenshot(&client, "runs-phone.png").await;
        client.close().await.expect("close browser");
    });
}
