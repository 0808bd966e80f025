//! Test-only helpers shared by the integration tests of several crates.
//!
//! [`NatsServer`] spawns a real `nats-server` with JetStream on a free port and its own
//! store directory, so tests run in parallel and can stop and restart their server.
//! [`prometheus::sample`] reads one series out of a `/metrics` text.

pub mod prometheus;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `nats-server -js` owned by one test; killed and cleaned up on drop.
#[derive(Debug)]
pub struct NatsServer {
    port: u16,
    store: tempfile::TempDir,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts a server on a free loopback port and waits until it accepts connections.
    /// The binary is `$KAIROS_NATS_SERVER`, else `nats-server` on `PATH`.
    ///
    /// # Panics
    /// When the server cannot be started: a test that needs NATS fails, it never skips.
    pub fn start() -> NatsServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("pick a free port")
            .port();
        let store = tempfile::tempdir().expect("temp dir for the JetStream store");
        let mut server = NatsServer {
            port,
            store,
            child: None,
        };
        server.restart();
        server
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server (as a crash would); its store directory stays.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port with the same store.
    ///
    /// # Panics
    /// When the server does not come up within 10 s.
    pub fn restart(&mut self) {
        self.stop();
        self.child = Some(spawn(self.port, self.store.path()));
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nats-server did not start on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn(port: u16, store: &Path) -> Child {
    let binary = std::env::var("KAIROS_NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
    Command::new(&binary)
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(store)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {binary:?} (install nats-server): {err}"))
}
