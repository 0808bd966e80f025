//! The schedule page (`/ui/schedules/{id}`) in a real browser: Debian's Chromium, headless,
//! driven through chromedriver against a real `kairos serve` with PostgreSQL and
//! nats-server (see `support/browser.rs`).
//!
//! Without auth the page asks for no token and its buttons work.

#[path = "support/browser.rs"]
mod browser;
mod support;

use browser::{browser, schedule, wait_text, Driver};
use fantoccini::Locator;
use serde_json::{json, Value};
use support::Served;

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
