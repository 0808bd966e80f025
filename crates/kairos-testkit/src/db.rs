//! [`TestDb`]: a fresh PostgreSQL database per test, migrated, dropped when the test ends
//! (passed or panicked). The server is `$KAIROS_TEST_DATABASE_URL`'s (`.cargo/config.toml` points it at
//! the machine's PostgreSQL). Tests that check rows directly use the [`sqlx`] re-exported
//! here, so the crates under test need no database client of their own.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, Executor, PgConnection, PgPool};

/// Connections per test pool: enough for a dispatcher, a planner and a listener at once.
const MAX_CONNECTIONS: u32 = 8;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A database owned by one test.
#[derive(Debug)]
pub struct TestDb {
    pool: PgPool,
    server: String,
    name: String,
}

impl TestDb {
    /// Creates a database with a name no other test (or test run) uses, applies the
    /// migrations, and returns it with a pool.
    ///
    /// # Panics
    /// When PostgreSQL cannot be reached or refuses: a test that needs it fails, it never
    /// skips.
    pub async fn new() -> TestDb {
        let db = TestDb::empty().await;
        kairos_store::migrate(&db.pool)
            .await
            .expect("migrate the test database");
        db
    }

    /// A database of its own with no table at all (for tests of the migrations).
    ///
    /// # Panics
    /// As [`TestDb::new`].
    pub async fn empty() -> TestDb {
        let url = std::env::var("KAIROS_TEST_DATABASE_URL")
            .expect("KAIROS_TEST_DATABASE_URL (set by .cargo/config.toml) names the test server");
        let (server, _) = url
            .rsplit_once('/')
            .expect("KAIROS_TEST_DATABASE_URL ends with a database");
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let name = format!(
            "kairos_test_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = PgConnection::connect(&url)
            .await
            .unwrap_or_else(|err| panic!("cannot reach PostgreSQL at {url}: {err}"));
        admin
            .execute(format!("create database {name}").as_str())
            .await
            .expect("create the test database");
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect(&format!("{server}/{name}"))
            .await
            .expect("connect to the test database");
        TestDb {
            pool,
            server: server.to_string(),
            name,
        }
    }

    /// A pool on the test database (cheap to clone).
    pub fn pool(&self) -> PgPool {
        self.pool.clone()
    }

    /// [`store_workflow`] on this database.
    pub async fn store_workflow(&self, workflow_id: &str, version: i32) {
        store_workflow(&self.pool, workflow_id, version).await;
    }

    /// The test database's URL (for child processes).
    pub fn url(&self) -> String {
        format!("{}/{}", self.server, self.name)
    }
}

impl Drop for TestDb {
    /// Drops the database, ending any connection still open on it. Runs on its own thread
    /// and runtime, since a test's runtime may be shutting down.
    fn drop(&mut self) {
        let admin = format!("{}/postgres", self.server);
        let statement = format!("drop database if exists {} with (force)", self.name);
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let mut conn = PgConnection::connect(&admin).await?;
                conn.execute(statement.as_str()).await.map(|_| ())
            })
        })
        .join();
        if let Ok(Err(err)) = dropped {
            eprintln!("test database {} not dropped: {err}", self.name);
        }
    }
}

/// Stores workflow `workflow_id` version `version` with a one-node DAG, as a deploy would,
/// so that schedules naming it may be written (an upsert naming a version that is not
/// stored is refused). A version already stored is left as it is.
///
/// # Panics
/// When the insert fails.
pub async fn store_workflow(pool: &PgPool, workflow_id: &str, version: i32) {
    let mut conn = pool.acquire().await.expect("a connection");
    let now: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("select now()")
        .fetch_one(&mut *conn)
        .await
        .expect("the database clock");
    let dag = serde_json::json!({"nodes": [{"id": "a"}]});
    kairos_store::workflows::put(&mut conn, workflow_id, version, &dag, now)
        .await
        .expect("store the workflow version");
}
