//! The browser side of the operator page's tests (`tests/ui_browser_*.rs`): a chromedriver
//! the test starts on a free port (killed when dropped), headless Chromium sessions (desktop
//! or a 390x844 phone), waits on what the page shows, and screenshots under
//! `<CARGO_TARGET_TMPDIR>/ui-screenshots/`; and the server side they share: a `kairos serve`
//! config with a deployer and a reader token, the API called as a client, and a schedule body.
//!
//! A test file includes it beside `support` (`#[path = "support/browser.rs"] mod browser;`).

#![allow(dead_code)] // Not every helper is used by every test.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::support::sha256_hex;

/// Longest wait for anything the page does.
pub const WAIT: Duration = Duration::from_secs(30);

/// A chromedriver on a free loopback port, killed when dropped.
pub struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    /// Starts chromedriver on a free port (it fails the test when it is not installed).
    pub fn start() -> Driver {
        let port = free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver must be installed (apt-get install chromium-driver)");
        Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port()
}

pub fn screenshots_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot folder");
    dir
}

/// Connects to chromedriver (retrying while it starts) with a headless Chromium.
pub async fn browser(driver: &Driver, profile: &tempfile::TempDir) -> Client {
    connect(driver, profile, None).await
}

/// A headless Chromium whose page is a 390x844 phone screen (a desktop window cannot be
/// made that narrow).
pub async fn phone(driver: &Driver, profile: &tempfile::TempDir) -> Client {
    let metrics = json!({"deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 1.0}});
    connect(driver, profile, Some(metrics)).await
}

pub async fn connect(
    driver: &Driver,
    profile: &tempfile::TempDir,
    mobile: Option<Value>,
) -> Client {
    let mut options = json!({
        "binary": "/usr/bin/chromium",
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,800", "--hide-scrollbars",
                 format!("--user-data-dir={}", profile.path().display())],
    });
    if let Some(mobile) = mobile {
        options["mobileEmulation"] = mobile;
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), options);
    let deadline = Instant::now() + WAIT;
    loop {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&driver.url)
            .await
        {
            Ok(client) => return client,
            Err(err) => {
                assert!(
                    Instant::now() < deadline,
                    "Chromium did not start through chromedriver within {WAIT:?}: {err}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Waits until `css` matches an element whose text contains `text`; that element.
pub async fn wait_text(client: &Client, css: &str, text: &str) -> Element {
    let deadline = Instant::now() + WAIT;
    let mut last = String::new();
    loop {
        if let Ok(found) = client.find_all(Locator::Css(css)).await {
            for element in found {
                if let Ok(seen) = element.text().await {
                    if seen.contains(text) {
                        return element;
                    }
                    last = seen;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no {css:?} containing {text:?} within {WAIT:?}; last text seen: {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn count(client: &Client, css: &str) -> usize {
    client
        .find_all(Locator::Css(css))
        .await
        .map(|v| v.len())
        .unwrap_or(0)
}

pub async fn screenshot(client: &Client, name: &str) -> PathBuf {
    let png = client.screenshot().await.expect("screenshot");
    assert!(png.starts_with(b"\x89PNG"), "{name} is not a PNG");
    let path = screenshots_dir().join(name);
    std::fs::write(&path, png).expect("write screenshot");
    path
}

/// A Chrome DevTools command sent through the WebDriver session (chromedriver's
/// `POST /session/{id}/goog/cdp/execute`).
#[derive(Debug)]
struct Cdp {
    body: Value,
}

impl fantoccini::wd::WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base_url: &reqwest::Url,
        session_id: Option<&str>,
    ) -> Result<reqwest::Url, <reqwest::Url as std::str::FromStr>::Err> {
        let session = session_id.expect("a session");
        base_url.join(&format!("session/{session}/goog/cdp/execute"))
    }

    fn method_and_body(&self, _: &reqwest::Url) -> (hyper::Method, Option<String>) {
        (hyper::Method::POST, Some(self.body.to_string()))
    }
}

/// Makes the page (the viewport) `width` x `height` through the WebDriver session, also
/// below the narrowest window a desktop Chromium allows (about 500 px): the session's
/// DevTools device metrics, as a phone's.
pub async fn set_narrow_viewport(client: &Client, width: u32, height: u32) {
    let body = json!({"cmd": "Emulation.setDeviceMetricsOverride", "params": {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": true}});
    client
        .issue_cmd(Cdp { body })
        .await
        .expect("device metrics");
}

/// Sizes the window so that the page itself (the viewport) is `width` x `height`.
pub async fn set_viewport(client: &Client, width: u32, height: u32) {
    client.set_window_size(width, height).await.expect("resize");
    let chrome = client
        .execute(
            "return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight];",
            vec![],
        )
        .await
        .expect("window frame");
    let extra = |i: usize| u32::try_from(chrome[i].as_u64().unwrap_or(0)).unwrap_or(0);
    client
        .set_window_size(width + extra(0), height + extra(1))
        .await
        .expect("resize");
}

pub async fn sign_in(client: &Client, token: &str) {
    wait_text(client, "#token-panel:not([hidden]) h2", "Sign in").await;
    let input = client
        .find(Locator::Css("#token"))
        .await
        .expect("token input");
    input.send_keys(token).await.expect("type token");
    client
        .find(Locator::Css("#token-form button"))
        .await
        .expect("token button")
        .click()
        .await
        .expect("use token");
}

/// The deployer's token (named `operator`) in [`tokens_config`].
pub const DEPLOYER: &str = "ui-deployer-secret";
/// The reader's token (named `viewer`) in [`tokens_config`].
pub const READER: &str = "ui-reader-secret";

/// The config file of the served instance: static tokens for a deployer and a reader.
pub fn tokens_config(dir: &tempfile::TempDir) -> PathBuf {
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
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
}

impl Api {
    /// `method path` with `body`; the JSON answer (null when empty), which must be a success.
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
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

/// An upsert body: workflow `report` version 1, user `alice`, overlap `allow`, no catch-up.
pub fn schedule(id: &str, spec: &str, zone: &str, jitter_ms: u32) -> Value {
    json!({
        "schedule_id": id, "workflow_id": "report", "version": 1, "user_id": "alice",
        "cron_expr": spec, "timezone": zone, "jitter_ms": jitter_ms,
        "overlap_policy": "allow", "catchup_policy": "none"
    })
}

/// Runs `script` in the page; its answer.
pub async fn js(client: &Client, script: &str) -> Value {
    client.execute(script, vec![]).await.expect("script")
}

/// How many times the page has loaded its fragment (the refresh counts).
pub async fn loads(client: &Client) -> u64 {
    js(
        client,
        "return Number(document.getElementById('content').dataset.loads || '0');",
    )
    .await
    .as_u64()
    .expect("loads")
}

/// Waits until the API shows run `key` in `status`.
pub async fn wait_status(http: &reqwest::Client, base: &str, key: &str, status: &str) {
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

/// Triggers schedule `id` with request id `request` on a server without auth, and answers
/// the run's key.
pub async fn trigger(http: &reqwest::Client, base: &str, id: &str, request: &str) -> String {
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

/// Reports `body` as the status of run `key`, which must be accepted.
pub async fn report(http: &reqwest::Client, base: &str, key: &str, body: Value) {
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

/// Deploys workflow `report` version 1 and upserts `schedules` on a server without auth
/// (`auth.mode = none`), each answered 201.
pub async fn deploy_open(http: &reqwest::Client, base: &str, schedules: &[Value]) {
    let answer = http
        .put(format!("{base}/workflows/report/versions/1"))
        .json(&json!({"dag": {"nodes": [{"id": "a"}]}}))
        .send()
        .await
        .expect("deploy");
    assert_eq!(answer.status(), reqwest::StatusCode::CREATED);
    for body in schedules {
        let answer = http
            .post(format!("{base}/schedules/upsert"))
            .json(body)
            .send()
            .await
            .expect("upsert");
        assert_eq!(answer.status(), reqwest::StatusCode::CREATED, "{body}");
    }
}

/// Clears the field `css` and types `text` into it.
pub async fn type_into(client: &Client, css: &str, text: &str) {
    let field = client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|err| panic!("{css}: {err}"));
    field.clear().await.expect("clear");
    field.send_keys(text).await.expect("type");
}

/// Clicks `css` once it is on the page.
pub async fn click(client: &Client, css: &str) {
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
