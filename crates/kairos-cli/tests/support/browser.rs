//! The browser side of the operator page's test: a chromedriver the test starts on a free
//! port (killed when dropped), headless Chromium sessions (desktop or a 390x844 phone),
//! waits on what the page shows, and screenshots under `<CARGO_TARGET_TMPDIR>/ui-screenshots/`.

#![allow(dead_code)] // Not every helper is used by every test.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

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
