//! What the dispatcher decided for each claimed run, as a value the store records in one
//! statement ([`crate::dispatch::record`]). An [`Outcome`] is built only by its
//! constructors, so every outcome is a legal move out of `PENDING`; the status it leads to,
//! the reason written on the row and whether a publish was attempted all follow from it.

use chrono::{DateTime, Utc};
use kairos_core::RunStatus;

/// What happened to one claimed run. Built only by its constructors, so every outcome is a
/// legal move out of `PENDING`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    idempotency_key: String,
    settled: Settled,
}

/// The move an [`Outcome`] records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Published and acknowledged: `ENQUEUED`.
    Enqueued {
        /// Its stream sequence.
        stream_seq: i64,
        /// Published under `skip`/`queue`: counts against the one-in-flight index.
        exclusive: bool,
        /// When the stream acknowledged it, on the database's clock (an estimate that never
        /// runs ahead of it); `None`: the recording statement's clock.
        published_at: Option<DateTime<Utc>>,
    },
    /// The publish failed but may succeed later: stays `PENDING` (or `RETRYING`), invariant
    /// "nothing is lost while NATS is down".
    Retry {
        /// The launch error.
        error: String,
    },
    /// Not published because the launch stream of its region is unavailable: stays `PENDING`
    /// (or `RETRYING`), nothing attempted. With `pin`, the region is recorded as the run's
    /// launch region (it has no fallback to go to), and the dispatchers leave the run alone
    /// until the region is back.
    Held {
        /// The unavailable region.
        region: String,
        /// Record `region` as the run's launch region.
        pin: bool,
    },
    /// The stream refused it for good (e.g. too large): `FAILED`.
    Refused {
        /// The launch error.
        error: String,
    },
    /// Not published because it must not go out: `FAILED`.
    Unlaunchable(Unlaunchable),
    /// Overlap `skip`: `SKIPPED`.
    Skipped {
        /// Why.
        reason: String,
    },
    /// Overlap `queue`: `QUEUED` behind the run in flight.
    Queued {
        /// Why.
        reason: String,
    },
}

/// Why a claimed run must not go out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unlaunchable {
    /// Due longer than the launch deadline.
    LaunchDeadline,
    /// Its workflow version is not stored.
    WorkflowMissing {
        /// The workflow.
        workflow_id: String,
        /// Its version.
        version: i32,
    },
}

impl Unlaunchable {
    /// The reason written on the run.
    pub fn reason(&self) -> String {
        match self {
            Unlaunchable::LaunchDeadline => "launch deadline passed".to_string(),
            Unlaunchable::WorkflowMissing {
                workflow_id,
                version,
            } => format!("workflow {workflow_id:?} version {version} not found"),
        }
    }
}

impl Outcome {
    /// Published and acknowledged at `stream_seq`, at `published_at` on the database's clock
    /// when the caller knows it.
    pub fn enqueued(
        key: &str,
        stream_seq: i64,
        exclusive: bool,
        published_at: Option<DateTime<Utc>>,
    ) -> Outcome {
        Outcome::new(
            key,
            Settled::Enqueued {
                stream_seq,
                exclusive,
                published_at,
            },
        )
    }

    /// A retryable launch error: the run stays `PENDING`.
    pub fn retry(key: &str, error: String) -> Outcome {
        Outcome::new(key, Settled::Retry { error })
    }

    /// Not published: the launch stream of `region` is unavailable (see [`Settled::Held`]).
    pub fn held(key: &str, region: &str, pin: bool) -> Outcome {
        Outcome::new(
            key,
            Settled::Held {
                region: region.to_string(),
                pin,
            },
        )
    }

    /// A permanent launch error: the run `FAILED`.
    pub fn refused(key: &str, error: String) -> Outcome {
        Outcome::new(key, Settled::Refused { error })
    }

    /// Not published because it must not go out: the run `FAILED`.
    pub fn unlaunchable(key: &str, why: Unlaunchable) -> Outcome {
        Outcome::new(key, Settled::Unlaunchable(why))
    }

    /// Overlap `skip`.
    pub fn skipped(key: &str, reason: String) -> Outcome {
        Outcome::new(key, Settled::Skipped { reason })
    }

    /// Overlap `queue`.
    pub fn queued(key: &str, reason: String) -> Outcome {
        Outcome::new(key, Settled::Queued { reason })
    }

    fn new(key: &str, settled: Settled) -> Outcome {
        Outcome {
            idempotency_key: key.to_string(),
            settled,
        }
    }

    /// The run.
    pub fn key(&self) -> &str {
        &self.idempotency_key
    }

    /// What happened.
    pub fn settled(&self) -> &Settled {
        &self.settled
    }

    /// The status the run takes; `None` for a retryable launch error, which leaves it as
    /// it was (`PENDING`, or `RETRYING`).
    pub fn new_status(&self) -> Option<RunStatus> {
        Some(match self.settled {
            Settled::Enqueued { .. } => RunStatus::Enqueued,
            Settled::Retry { .. } | Settled::Held { .. } => return None,
            Settled::Refused { .. } | Settled::Unlaunchable(_) => RunStatus::Failed,
            Settled::Skipped { .. } => RunStatus::Skipped,
            Settled::Queued { .. } => RunStatus::Queued,
        })
    }

    /// The human-readable reason written on the row, if any.
    pub fn reason(&self) -> Option<String> {
        match &self.settled {
            Settled::Skipped { reason } | Settled::Queued { reason } => Some(reason.clone()),
            Settled::Unlaunchable(why) => Some(why.reason()),
            Settled::Refused { error } => Some(format!("launch failed permanently: {error}")),
            Settled::Enqueued { .. } | Settled::Retry { .. } | Settled::Held { .. } => None,
        }
    }

    /// The launch error of this attempt, if a publish failed or could not be tried.
    pub fn launch_error(&self) -> Option<String> {
        match &self.settled {
            Settled::Retry { error } | Settled::Refused { error } => Some(error.clone()),
            Settled::Held { region, .. } => Some(format!(
                "the launch stream of region {region:?} is unavailable"
            )),
            _ => None,
        }
    }

    /// The region to record as the run's launch region without publishing (see
    /// [`Settled::Held`]).
    pub(crate) fn pin(&self) -> Option<&str> {
        match &self.settled {
            Settled::Held { region, pin: true } => Some(region),
            _ => None,
        }
    }

    pub(crate) fn stream_seq(&self) -> Option<i64> {
        match self.settled {
            Settled::Enqueued { stream_seq, .. } => Some(stream_seq),
            _ => None,
        }
    }

    pub(crate) fn published_at(&self) -> Option<DateTime<Utc>> {
        match self.settled {
            Settled::Enqueued { published_at, .. } => published_at,
            _ => None,
        }
    }

    pub(crate) fn exclusive(&self) -> bool {
        matches!(
            self.settled,
            Settled::Enqueued {
                exclusive: true,
                ..
            }
        )
    }

    /// A publish was attempted (counts in `attempts`).
    pub(crate) fn attempted(&self) -> bool {
        matches!(
            self.settled,
            Settled::Enqueued { .. } | Settled::Retry { .. } | Settled::Refused { .. }
        )
    }
}
