//! The bench's own scratch space: a database `kairos_bench` on the configured PostgreSQL
//! (dropped at the end), a nats-server of its own with JetStream in a temporary directory
//! (or a cluster of them, `--nats-cluster`, or the server `--nats-url` points at), and the
//! idle schedules of mode `stored`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

use std::sync::{Arc, Mutex};

use kairos_testkit::NatsCluster;

use crate::Args;

/// The scratch database's name.
const DB_NAME: &str = "kairos_bench";

/// The workflows the bench schedules launch are `bench-0`, `bench-1`, …
pub const WORKFLOW: &str = "bench";

/// What the bench set up, and where.
#[derive(Debug)]
pub struct Scratch {
    /// The scratch database.
    pub pool: PgPool,
    /// Its URL (given to the instances).
    pub db_url: String,
    /// The server's maintenance URL (to drop the scratch database).
    admin_url: String,
    /// The NATS server the instances use.
    pub nats_url: String,
    /// The nats-server the bench started, if it started one.
    nats: Option<tokio::process::Child>,
    /// The JetStream cluster the bench started (`--nats-cluster`), shared with the fault
    /// that kills its launch stream's leader.
    pub cluster: Option<Arc<Mutex<NatsCluster>>>,
    /// Its store directory.
    _store: Option<TempDir>,
}

impl Scratch {
    /// Creates the scratch database (dropping a leftover one), applies kairos's migrations
    /// with `kairos migrate`, and starts a nats-server unless `--nats-url` names one.
    pub async fn create(args: &Args) -> Result<Scratch> {
        let admin_url = args.database_url.clone();
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&admin_url)
            .await
            .with_context(|| format!("connect to PostgreSQL at {admin_url}"))?;
        sqlx::query(&format!("drop database if exists {DB_NAME} with (force)"))
            .execute(&admin)
            .await?;
        sqlx::query(&format!("create database {DB_NAME}"))
            .execute(&admin)
            .await?;
        admin.close().await;
        let db_url = match admin_url.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{DB_NAME}"),
            None => bail!("--database-url must name a database: {admin_url}"),
        };
        let migrated = tokio::process::Command::new(&args.kairos)
            .arg("migrate")
            .env("DATABASE_URL", &db_url)
            .status()
            .await
            .with_context(|| format!("run {} migrate", args.kairos))?;
        if !migrated.success() {
            bail!("{} migrate failed", args.kairos);
        }
        let pool = PgPoolOptions::new()
            .max_connections(args.instances as u32 + 2)
            .connect(&db_url)
            .await?;
        let mut cluster = None;
        let (nats_url, nats, store) = match (&args.nats_url, args.nats_cluster) {
            (Some(url), _) => (url.clone(), None, None),
            (None, Some(size)) => {
                let started = tokio::task::spawn_blocking(move || NatsCluster::start(size))
                    .await
                    .context("start the NATS cluster")?;
                let urls = started.urls();
                cluster = Some(Arc::new(Mutex::new(started)));
                (urls, None, None)
            }
            (None, None) => {
                let (url, child, store) = start_nats(&args.nats_server).await?;
                (url, Some(child), Some(store))
            }
        };
        Ok(Scratch {
            pool,
            db_url,
            admin_url,
            nats_url,
            nats,
            cluster,
            _store: store,
        })
    }

    /// The size of the JetStream cluster the bench started, if it started one.
    pub fn cluster_size(&self) -> Option<usize> {
        let cluster = self.cluster.as_ref()?;
        Some(cluster.lock().expect("not poisoned").size())
    }

    /// A client of the instances' NATS server (every node of a cluster as a seed).
    pub async fn nats(&self) -> Result<async_nats::Client> {
        let seeds: Vec<&str> = self.nats_url.split(',').map(str::trim).collect();
        async_nats::connect(seeds.as_slice())
            .await
            .with_context(|| format!("connect to NATS at {}", self.nats_url))
    }

    /// Drops the scratch database and stops the bench's nats-server.
    pub async fn drop_all(mut self) -> Result<()> {
        self.pool.close().await;
        if let Some(nats) = self.nats.as_mut() {
            let _ = nats.kill().await;
        }
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&self.admin_url)
            .await?;
        sqlx::query(&format!("drop database if exists {DB_NAME} with (force)"))
            .execute(&admin)
            .await?;
        Ok(())
    }
}

/// A temporary directory removed on drop.
#[derive(Debug)]
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts `nats-server -js` on a free port with its store in a fresh directory, and waits
/// until it accepts connections.
async fn start_nats(binary: &str) -> Result<(String, tokio::process::Child, TempDir)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let store = TempDir(std::env::temp_dir().join(format!("kairos-bench-nats-{port}")));
    std::fs::create_dir_all(&store.0)?;
    let mut command = tokio::process::Command::new(binary);
    let child = command
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(&store.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {binary} (install nats-server or pass --nats-url)"))?;
    let url = format!("nats://127.0.0.1:{port}");
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if started.elapsed() > Duration::from_secs(10) {
            bail!("{binary} did not listen on port {port} within 10 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((url, child, store))
}

/// Writes `count` schedules that are not due (a yearly spec whose next tick is next
/// January) straight into `schedules`, in chunks, then analyzes the table. Registering them
/// through the API would measure the registrar, not the burst.
pub async fn store_idle_schedules(pool: &PgPool, count: usize) -> Result<()> {
    let started = Instant::now();
    let chunk = 500_000usize;
    let mut written = 0usize;
    while written < count {
        let n = chunk.min(count - written);
        sqlx::query(
            "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, \
               timezone, next_run_at, overlap_policy) \
             select 'idle-' || i, 'idle', 1, 'bench', '0 0 1 1 *', 'UTC', \
               date_trunc('year', now()) + interval '1 year', 'allow' \
             from generate_series($1::int8, $2::int8) as i",
        )
        .bind(written as i64)
        .bind((written + n - 1) as i64)
        .execute(pool)
        .await?;
        written += n;
    }
    sqlx::query("vacuum analyze schedules")
        .execute(pool)
        .await?;
    eprintln!(
        "bench: stored {count} idle schedules in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
