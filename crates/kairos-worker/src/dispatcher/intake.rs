//! Status intake from the NATS status subject: each decoded event goes through the same
//! store function as `POST /runs/{key}/status` (forward-only, one statement).

use std::future::Future;

use kairos_launcher::status::{Disposition, ReportedStatus, StatusConsumer, StatusEvent};
use kairos_store::status::{self, Applied, Reported, StatusReport};
use kairos_store::PgPool;

use crate::metrics::{record_status, StatusOutcome};

/// The store's report for an event.
pub fn report_of(event: &StatusEvent) -> StatusReport {
    StatusReport {
        status: match event.status {
            ReportedStatus::Started => Reported::Started,
            ReportedStatus::Success => Reported::Success,
            ReportedStatus::Failed => Reported::Failed,
        },
        run_id: event.run_id.clone(),
        executor_id: event.executor_id.clone(),
        error: event.error.clone(),
    }
}

/// Records one event. A conflict (another executor owns the run) or an unknown key is
/// logged and acknowledged: redelivering it would not change the answer. A database
/// failure asks for redelivery.
pub async fn take_status(pool: &PgPool, event: StatusEvent) -> Disposition {
    let key = event.idempotency_key.clone();
    let reported = report_of(&event).status.as_str();
    let applied = async {
        let mut conn = pool.acquire().await?;
        status::apply(&mut conn, &key, &report_of(&event), None).await
    };
    match applied.await {
        Ok(Applied::Moved(run)) => {
            record_status(reported, StatusOutcome::Applied);
            tracing::debug!(key = %key, status = %run.status, "run status recorded");
            Disposition::Done
        }
        Ok(Applied::Unchanged(run)) => {
            record_status(reported, StatusOutcome::Unchanged);
            tracing::debug!(key = %key, status = %run.status, reported,
                "status report does not move the run forward; ignored");
            Disposition::Done
        }
        Ok(Applied::Conflict { owner, .. }) => {
            record_status(reported, StatusOutcome::Conflict);
            tracing::warn!(
                key = %key,
                owner = %owner,
                executor_id = ?event.executor_id,
                "status from an executor that does not own the run; ignored"
            );
            Disposition::Done
        }
        Ok(Applied::NotFound) => {
            record_status(reported, StatusOutcome::UnknownRun);
            tracing::warn!(key = %key, "status for an unknown run; ignored");
            Disposition::Done
        }
        Err(err) => {
            tracing::warn!(key = %key, error = %err, "status not recorded; will retry");
            Disposition::Retry
        }
    }
}

/// Runs the status consumer into the store until `shutdown` resolves.
///
/// # Errors
/// When the consumer fails fatally.
pub async fn consume_status(
    pool: PgPool,
    consumer: &StatusConsumer,
    shutdown: impl Future<Output = ()>,
) -> kairos_launcher::Result<()> {
    let pool = &pool;
    consumer
        .run(|event| take_status(pool, event), shutdown)
        .await
}
