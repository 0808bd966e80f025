//! Test-only helpers shared by the integration tests of several crates.
//!
//! [`NatsServer`] spawns a real `nats-server` with JetStream on a port of its own choosing
//! and its own store directory, so tests run in parallel and can stop and restart their
//! server. [`NatsCluster`] is three of them routed into one JetStream cluster, [`NatsSupercluster`]
//! one per region joined by gateways. [`TestDb`] is a fresh, migrated PostgreSQL database per test.
//! [`prometheus::sample`] reads one series out of a `/metrics` text. [`deploy::workflow`] is
//! the deploy call of the bench and the chaos suite.

mod cluster;
mod db;
pub mod deploy;
pub mod prometheus;
mod protocol;
mod supercluster;

pub use cluster::NatsCluster;
pub use db::{store_workflow, TestDb};
/// For tests that read or write rows directly (the crates under test need no database
/// client of their own).
pub use sqlx;
pub use supercluster::NatsSupercluster;

use std::fs::File;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a start or restart may take before the test fails.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// A `nats-server -js` owned by one test; killed and cleaned up on drop.
#[derive(Debug)]
pub struct NatsServer {
    port: u16,
    store: tempfile::TempDir,
    /// Ports files and the server log; kept apart from the JetStream store.
    scratch: tempfile::TempDir,
    /// Arguments given beyond the defaults.
    extra: Vec<String>,
    /// The folder of a configuration file written for the server, kept for restarts.
    config: Option<tempfile::TempDir>,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts a server on a loopback port and waits until it accepts connections.
    /// The binary is `$KAIROS_NATS_SERVER`, else `nats-server` on `PATH`.
    ///
    /// The server picks the port itself (`-p -1`) and reports it in a ports file. Picking
    /// a free port here and handing it over would leave a window in which a parallel test
    /// takes the same port; the second server then exits while the connection check still
    /// succeeds against the first.
    ///
    /// # Panics
    /// When the server cannot be started: a test that needs NATS fails, it never skips.
    pub fn start() -> NatsServer {
        NatsServer::start_with(&[])
    }

    /// [`NatsServer::start`] with more arguments for `nats-server` (e.g. `-c FILE`), kept
    /// for [`NatsServer::restart`].
    ///
    /// # Panics
    /// When the server cannot be started.
    pub fn start_with(extra: &[String]) -> NatsServer {
        let store = tempfile::tempdir().expect("temp dir for the JetStream store");
        let scratch = tempfile::tempdir().expect("temp dir for the ports file and log");
        let mut child = spawn(None, store.path(), scratch.path(), extra);
        let port = match wait_for_ports_file(&mut child, scratch.path()) {
            Ok(port) => port,
            Err(reason) => {
                stop_child(&mut child);
                panic!(
                    "nats-server did not start: {reason}\n{}",
                    log_tail(scratch.path())
                );
            }
        };
        wait_until_connectable(port);
        NatsServer {
            port,
            store,
            scratch,
            extra: extra.to_vec(),
            config: None,
            child: Some(child),
        }
    }

    /// [`NatsServer::start`] with a configuration that maps `kairos.status.*` onto
    /// `partitions` partitions (`kairos.status.{{partition(N,1)}}.{{wildcard(1)}}`), as an
    /// operator maps the status subjects of executors that report on `kairos.status.<key>`.
    ///
    /// # Panics
    /// When the configuration cannot be written or the server cannot be started.
    pub fn start_mapping_status(partitions: u16) -> NatsServer {
        let folder = tempfile::tempdir().expect("temp dir for the server configuration");
        let config = folder.path().join("nats.conf");
        std::fs::write(
            &config,
            format!(
                "mappings = {{\n  \"kairos.status.*\": \
                 \"kairos.status.{{{{partition({partitions},1)}}}}.{{{{wildcard(1)}}}}\"\n}}\n"
            ),
        )
        .expect("write the nats-server configuration");
        let mut server = NatsServer::start_with(&["-c".to_string(), config.display().to_string()]);
        server.config = Some(folder);
        server
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The server's log (appended across restarts; removed with the server).
    pub fn log_path(&self) -> PathBuf {
        log_path(self.scratch.path())
    }

    /// Whether the server process is running now, or how it exited; for failure messages
    /// of harnesses that outlive a single test.
    pub fn state(&mut self) -> String {
        match self.child.as_mut().map(Child::try_wait) {
            None => "stopped by its owner".to_string(),
            Some(Ok(None)) => format!("running on port {}", self.port),
            Some(Ok(Some(status))) => format!("exited on its own ({status})"),
            Some(Err(err)) => format!("state unknown ({err})"),
        }
    }

    /// Kills the server (as a crash would); its store directory stays.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop_child(&mut child);
        }
    }

    /// Starts the server again on the same port with the same store, so clients reconnect
    /// to the same URL.
    ///
    /// # Panics
    /// When the server does not come up within 10 s, in particular when another process
    /// took the port while the server was stopped.
    pub fn restart(&mut self) {
        self.stop();
        remove_ports_files(self.scratch.path());
        let mut child = spawn(
            Some(self.port),
            self.store.path(),
            self.scratch.path(),
            &self.extra,
        );
        // The ports file carries our child's pid, so it proves that *our* server is
        // listening; a connection check alone would also succeed against whoever took
        // the port meanwhile.
        if let Err(reason) = wait_for_ports_file(&mut child, self.scratch.path()) {
            stop_child(&mut child);
            panic!(
                "nats-server did not restart on port {} (was the port taken while it was \
                 stopped?): {reason}\n{}",
                self.port,
                log_tail(self.scratch.path())
            );
        }
        self.child = Some(child);
        wait_until_connectable(self.port);
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Spawns `nats-server` with `extra` arguments; `port: None` lets it choose. Its log goes to
/// `scratch/nats.log`, appended across restarts, so a failure can show why the server exited.
fn spawn(port: Option<u16>, store: &Path, scratch: &Path, extra: &[String]) -> Child {
    let binary = std::env::var("KAIROS_NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
    let log = File::options()
        .create(true)
        .append(true)
        .open(log_path(scratch))
        .expect("open the nats-server log");
    let port = port.map_or_else(|| "-1".to_owned(), |port| port.to_string());
    Command::new(&binary)
        .args(["-js", "-a", "127.0.0.1", "-p", &port, "--ports_file_dir"])
        .arg(scratch)
        .arg("-sd")
        .arg(store)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {binary:?} (install nats-server): {err}"))
}

fn stop_child(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Waits for `<scratch>/<binary>_<pid>.ports`, which nats-server writes once it listens,
/// and returns the client port from it. Fails as soon as the child exits.
fn wait_for_ports_file(child: &mut Child, scratch: &Path) -> Result<u16, String> {
    let suffix = format!("_{}.ports", child.id());
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("poll nats-server") {
            return Err(format!("it exited with {status}"));
        }
        if let Some(port) = ports_file(scratch, &suffix).and_then(|path| client_port(&path)) {
            return Ok(port);
        }
        if Instant::now() >= deadline {
            return Err(format!("no ports file after {STARTUP_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A killed server leaves its ports file behind; remove it so that a reused pid cannot
/// match a stale file.
fn remove_ports_files(scratch: &Path) {
    let Ok(entries) = std::fs::read_dir(scratch) else {
        return;
    };
    for path in entries.filter_map(Result::ok).map(|entry| entry.path()) {
        if path
            .extension()
            .is_some_and(|extension| extension == "ports")
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn ports_file(scratch: &Path, suffix: &str) -> Option<PathBuf> {
    std::fs::read_dir(scratch)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.ends_with(suffix))
        })
}

/// Reads the port of `{"nats":["nats://127.0.0.1:<port>"], ...}`. `None` while the file
/// is still being written.
fn client_port(path: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(path).ok()?;
    let url = text.split("\"nats://").nth(1)?;
    let address = &url[..url.find('"')?];
    address.rsplit(':').next()?.parse().ok()
}

fn wait_until_connectable(port: u16) {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nats-server did not accept connections on port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn log_path(scratch: &Path) -> PathBuf {
    scratch.join("nats.log")
}

/// The last lines of the server log, for panic messages.
fn log_tail(scratch: &Path) -> String {
    let log = std::fs::read_to_string(log_path(scratch)).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let tail = lines[lines.len().saturating_sub(10)..].join("\n");
    format!("nats-server log (last lines):\n{tail}")
}
