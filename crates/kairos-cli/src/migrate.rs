//! `kairos migrate [--config FILE]`: apply the database migrations and exit; also the
//! connection `serve` shares.

use std::path::PathBuf;

use anyhow::Context;
use kairos_store::PgPool;

use crate::config::{self, Config};

/// Arguments of `kairos migrate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A TOML file layered over the defaults (see config/default.toml).
    #[arg(long)]
    config: Option<PathBuf>,
}

/// Applies every pending migration to `database.url`.
///
/// # Errors
/// Bad config, an unreachable database, or a failed migration.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let config = config::load(args.config.as_deref())
        .map_err(|err| anyhow::anyhow!(config::explain(&err)))?;
    let runtime = tokio::runtime::Runtime::new().context("start the async runtime")?;
    runtime.block_on(async {
        let pool = connect(&config).await?;
        kairos_store::migrate(&pool)
            .await
            .context("apply migrations")?;
        println!("kairos migrate: database is up to date");
        Ok(())
    })
}

/// A pool on `database.url` (created when missing; sessions bounded, see
/// `kairos_store::connect`).
///
/// # Errors
/// When the database cannot be reached within 10 s.
pub async fn connect(config: &Config) -> anyhow::Result<PgPool> {
    let pool = kairos_store::connect(&config.database.url, config.database.max_connections)
        .await
        .context("connect to PostgreSQL (database.url)")?;
    let database = config::redact_url(&config.database.url);
    tracing::info!(%database, "connected to PostgreSQL");
    match kairos_store::settings::advice(&pool).await {
        Ok(advice) => {
            for advice in advice {
                tracing::warn!(setting = advice.setting, value = %advice.value,
                    wanted = advice.wanted, "PostgreSQL setting {} is {}, kairos needs {}: {}",
                    advice.setting, advice.value, advice.wanted, advice.why);
            }
        }
        Err(err) => tracing::warn!(error = %err, "PostgreSQL settings not read"),
    }
    Ok(pool)
}
