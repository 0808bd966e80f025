//! The run's own PostgreSQL cluster: `initdb` in a temporary directory, `pg_ctl start` on a
//! free loopback port (its socket in the same directory), `pg_ctl -m fast restart` as a
//! fault, and `pg_ctl -m immediate stop` on drop. Never the machine's shared server.
//!
//! PostgreSQL refuses to run as root, so as root every command runs as user `postgres`
//! (`runuser`), which then owns the directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// A PostgreSQL cluster owned by the run.
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
}

impl Postgres {
    /// Creates and starts a cluster (trust authentication, user `postgres`).
    pub fn start(bin: &Path) -> Result<Postgres> {
        let dir = tempfile::Builder::new()
            .prefix("kairos-chaos-pg")
            .tempdir()?;
        let as_postgres = running_as_root();
        if as_postgres {
            run(Command::new("chown").arg("postgres:").arg(dir.path()))?;
        }
        let port = free_port()?;
        let cluster = Postgres {
            bin: bin.to_path_buf(),
            dir,
            port,
            as_postgres,
        };
        cluster.pg(
            "initdb",
            &["-D", &cluster.data(), "-U", "postgres", "-A", "trust"],
        )?;
        cluster.pg_ctl(&["start"])?;
        Ok(cluster)
    }

    /// `postgres://postgres@127.0.0.1:<port>/<database>`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// `pg_ctl -m fast restart`: every session is ended, the server is back when it returns.
    pub fn restart(&self) -> Result<()> {
        self.pg_ctl(&["-m", "fast", "restart"])
    }

    /// The server log (for messages when something fails).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn pg_ctl(&self, action: &[&str]) -> Result<()> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let log = self.log_path().display().to_string();
        let data = self.data();
        let mut args = vec!["-D", &data, "-w", "-t", "60", "-l", &log, "-o", &options];
        args.extend_from_slice(action);
        self.pg("pg_ctl", &args)
    }

    fn pg(&self, program: &str, args: &[&str]) -> Result<()> {
        let binary = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&binary);
            command
        } else {
            Command::new(&binary)
        };
        command.args(args);
        run(&mut command).with_context(|| format!("{} {}", binary.display(), args.join(" ")))
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.pg(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
    }
}

/// Runs a command to its end, quietly; its output goes into the error when it fails.
fn run(command: &mut Command) -> Result<()> {
    let output = command.output().with_context(|| format!("{command:?}"))?;
    if !output.status.success() {
        bail!(
            "{command:?} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

/// A loopback port nobody listens on now.
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
