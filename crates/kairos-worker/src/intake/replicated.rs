//! A batch is answered only once a standby has its commit (docs/reliability.md, "A
//! failover's lost tail"): under asynchronous replication a failover loses the commits the
//! new primary had not received, and an acknowledged report has left the status stream for
//! good. Not answered within [`STANDBY_WAIT`], its reports are sent again (NATS) or answered
//! 503 (HTTP); applied again, they change nothing. Without a streaming standby, or when the
//! standbys' positions are hidden from kairos's role, nothing waits.

use std::sync::Once;
use std::time::{Duration, Instant};

use kairos_store::{replication, PgPool};

use super::Error;

/// Longest wait for a standby to flush a batch's commit.
pub const STANDBY_WAIT: Duration = Duration::from_secs(2);
/// Between two reads of the standbys' positions.
const POLL: Duration = Duration::from_millis(2);

static HIDDEN: Once = Once::new();

/// Waits until a standby has flushed every commit made so far on the primary.
pub(super) async fn on_a_standby(pool: &PgPool) -> Result<(), Error> {
    let written = replication::written(pool).await?;
    if written.standbys == 0 {
        return Ok(());
    }
    let started = Instant::now();
    loop {
        match replication::flushed(pool, &written.lsn).await? {
            Some(true) => return Ok(()),
            None => {
                HIDDEN.call_once(|| {
                    tracing::warn!(
                        "standbys stream from the database, but their positions are hidden \
                         from kairos's role (grant it pg_monitor): status reports are \
                         acknowledged without waiting for a standby, and a failover may lose \
                         the last ones"
                    );
                });
                return Ok(());
            }
            Some(false) if started.elapsed() >= STANDBY_WAIT => {
                return Err(Error::NotReplicated {
                    waited_ms: started.elapsed().as_millis() as u64,
                })
            }
            Some(false) => tokio::time::sleep(POLL).await,
        }
    }
}
