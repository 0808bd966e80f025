//! Claims: the due runs a dispatch round locks (`for update skip locked`, held by the
//! caller's transaction), what it reads of each ([`Claimed`]), which runs an instance takes
//! ([`ClaimScope`]), and how long a silent round keeps them ([`bound_idle`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use kairos_core::{OverlapPolicy, RunSource, RunStatus};
use sqlx::PgConnection;

use crate::groups::AWAITING_LAUNCH;
use crate::Result;

/// A due run this transaction has locked (`PENDING`, or `RETRYING` whose next attempt is
/// due), with what the dispatcher needs to decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// The run's key; the `Nats-Msg-Id`.
    pub idempotency_key: String,
    /// Its schedule.
    pub schedule_id: String,
    /// The planned tick.
    pub run_at: DateTime<Utc>,
    /// When it is due.
    pub fire_at: DateTime<Utc>,
    /// What created it.
    pub source: RunSource,
    /// `PENDING`, or `RETRYING` (it already holds its schedule).
    pub status: RunStatus,
    /// The attempt to launch (1 unless an attempt failed before).
    pub attempt: i32,
    /// It counted against the one-in-flight index when its last attempt was published.
    pub exclusive: bool,
    /// The workflow to launch.
    pub workflow_id: String,
    /// Its version.
    pub version: i32,
    /// The user to launch as.
    pub user_id: String,
    /// The run's own overlap policy, else its schedule's now (`allow` for api runs and
    /// deleted schedules).
    pub overlap_policy: OverlapPolicy,
    /// Due longer than the launch deadline (since `fire_at`, or since its release from
    /// `QUEUED`): the run must not go out any more.
    pub late: bool,
    /// The schedule revision its tick was last checked against (`None` for runs the planner
    /// did not write, or written before runs had one).
    pub revision: Option<i64>,
    /// Its schedule's revision when this transaction claimed it (`None`: no such schedule).
    pub schedule_revision: Option<i64>,
    /// Its schedule's region when this transaction claimed it (`None`: no region).
    pub home_region: Option<String>,
    /// Its schedule's fallback regions, in order.
    pub fallback_regions: Vec<String>,
    /// The region an earlier launch of the run was recorded for: every later publish of the
    /// run goes there (a run never reaches the executors of two regions).
    pub launch_region: Option<String>,
    /// The region this launch goes to: `launch_region` when set, else the home region,
    /// unless the dispatcher routes it to a fallback before recording it.
    pub region: Option<String>,
}

/// The row [`claim`] and [`claim_key`] read into a [`Claimed`].
#[derive(sqlx::FromRow)]
struct ClaimedRow {
    idempotency_key: String,
    schedule_id: String,
    run_at: DateTime<Utc>,
    fire_at: DateTime<Utc>,
    #[sqlx(try_from = "String")]
    source: RunSource,
    #[sqlx(try_from = "String")]
    status: RunStatus,
    attempt: i32,
    exclusive: bool,
    workflow_id: String,
    version: i32,
    user_id: String,
    #[sqlx(try_from = "String")]
    overlap_policy: OverlapPolicy,
    late: bool,
    revision: Option<i64>,
    schedule_revision: Option<i64>,
    home_region: Option<String>,
    fallback_regions: Option<Vec<String>>,
    launch_region: Option<String>,
}

impl From<ClaimedRow> for Claimed {
    fn from(row: ClaimedRow) -> Claimed {
        Claimed {
            idempotency_key: row.idempotency_key,
            schedule_id: row.schedule_id,
            run_at: row.run_at,
            fire_at: row.fire_at,
            source: row.source,
            status: row.status,
            attempt: row.attempt,
            exclusive: row.exclusive,
            workflow_id: row.workflow_id,
            version: row.version,
            user_id: row.user_id,
            overlap_policy: row.overlap_policy,
            late: row.late,
            revision: row.revision,
            schedule_revision: row.schedule_revision,
            region: row
                .launch_region
                .clone()
                .or_else(|| row.home_region.clone()),
            home_region: row.home_region,
            fallback_regions: row.fallback_regions.unwrap_or_default(),
            launch_region: row.launch_region,
        }
    }
}

impl Claimed {
    /// Whether its schedule was already past the run's revision when it was claimed (a
    /// write that found the run held by another transaction left it behind), or gone.
    pub fn stale_at_claim(&self) -> bool {
        match (self.revision, self.schedule_revision) {
            (_, None) => self.source != RunSource::Api,
            (Some(run), Some(schedule)) => run != schedule,
            (None, Some(_)) => false,
        }
    }

    /// Whether a schedule now at `current` (`None`: deleted) has changed since this run was
    /// last checked against it: a `PENDING` run only (a retry's attempt was published
    /// before), and a write skips the runs a round holds, so the round must bring it in line
    /// before publishing it.
    pub fn left_behind(&self, current: Option<i64>) -> bool {
        let checked = self.revision.or(self.schedule_revision);
        self.status == RunStatus::Pending
            && match (checked, current) {
                (_, None) => self.source != RunSource::Api,
                (Some(checked), Some(current)) => checked != current,
                (None, Some(_)) => false,
            }
    }
}

const CLAIM_COLUMNS: &str = "r.idempotency_key, r.schedule_id, r.run_at, r.fire_at, r.source, \
    r.status, r.attempt, r.exclusive, \
    r.workflow_id, r.version, r.user_id, \
    case when r.source = 'api' then 'allow' \
      else coalesce(r.overlap_override, s.overlap_policy, 'allow') end \
      as overlap_policy, \
    coalesce(r.released_at, r.fire_at) < $1 - make_interval(secs => $2) as late, \
    r.revision, s.revision as schedule_revision, \
    s.region as home_region, s.fallback_regions, r.launch_region";

/// A claim: the runs `selection` picks (a `where` condition on `schedule_runs r`, with its
/// order and limit), locked `for update skip locked`, then joined to their schedules. The
/// lock comes first: a claim walks past every run another round holds (at a burst's tick,
/// most of the burst), and joining the schedule before the lock would read a schedule for
/// each run walked past.
fn claim_sql(selection: &str) -> String {
    format!(
        "with r as materialized ( \
           select r.idempotency_key, r.schedule_id, r.run_at, r.fire_at, r.source, r.status, \
             r.attempt, r.exclusive, r.workflow_id, r.version, r.user_id, r.overlap_override, \
             r.released_at, r.revision, r.priority, r.launch_region \
           from schedule_runs r where {selection} for update of r skip locked \
         ) \
         select {CLAIM_COLUMNS} from r \
         left join lateral (select s.overlap_policy, s.revision, s.region, \
           s.fallback_regions from schedules s \
           where s.schedule_id = r.schedule_id) s on true \
         order by r.priority desc, r.fire_at, r.idempotency_key"
    )
}

/// A claim's walk leaves alone every run whose row version it sees was written or locked
/// by a transaction still in progress when the statement took its snapshot (listed in the
/// snapshot, or at or past its `xmax` and begun before the walk): another round holds that
/// run.
///
/// Without this, such a run would still reach the row lock. If its holder commits first
/// (a round launching its wave, say), PostgreSQL locks the run's newest version, finds that
/// it no longer meets the claim's condition (it is `ENQUEUED` now), and leaves it out of
/// the result, but keeps the lock. The claim's round would then hold a run it never took
/// until its transaction ends, seconds later for a pre-staged round, and the run's status
/// reports would wait for it.
///
/// A row's `xmax` is 32 bits, so it is compared on the low 32 bits of the snapshot's ids.
/// A value that matches by chance (a multixact id) only leaves a run to a later claim: the
/// ids listed end with their transactions, and the range past the snapshot's `xmax` is
/// only the ids handed out between the snapshot and the walk.
const NOT_HELD_AT_SNAPSHOT: &str = "(r.xmax::text::int8 = 0 or not ( \
      r.xmax::text::int8 = any (array(select x::text::int8 & 4294967295 \
        from pg_snapshot_xip(pg_current_snapshot()) x)) \
      or (r.xmax::text::int8 \
          - (select pg_snapshot_xmax(pg_current_snapshot())::text::int8 & 4294967295)) \
        & 4294967295 < (select pg_current_xact_id()::text::int8 \
          - pg_snapshot_xmax(pg_current_snapshot())::text::int8)))";

/// Which due runs a claim takes beyond their order: [`claim`]'s filter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimScope {
    /// Regions whose launch stream is not ready: runs whose launch was recorded for one of
    /// them are left alone (they wait for it).
    pub unavailable: Vec<String>,
    /// The claiming instance's region. With one, runs of another region (their recorded
    /// launch region, else their schedule's) are claimed only once they are `others_after`
    /// past due: each region's runs are claimed by its own instances, and a claim cut off
    /// with its region holds its own region's runs and those without a region, never
    /// another region's. `None`: every due run.
    pub region: Option<String>,
    /// How long past due a run of another region waits for its own region's instances.
    pub others_after: Duration,
    /// Only runs due after this: the caller has claimed every run due by then that no other
    /// round held. The claim then starts the claim index there within each priority of
    /// `run_priorities` (migration `20260211000000_run_priorities.sql`) rather than at its
    /// first entry, and walks past none of the runs other rounds hold before it. `None`:
    /// every due run.
    pub after: Option<DateTime<Utc>>,
}

/// Locks up to `limit` runs due by `due_by` (`PENDING` or `RETRYING` with
/// `fire_at <= due_by`), highest priority first, then oldest `fire_at`, skipping runs another
/// transaction holds and those `scope` leaves to others. `due_by` is `now` plus the
/// dispatcher's pre-staging lead: a run due within the lead is claimed and prepared before
/// its time, and published at it. `now` decides whether a run is past its launch deadline.
///
/// The order is the partial index `schedule_runs_claim` read from its start, so a claim
/// costs O(`limit`) however many runs are due (the priority is on the run row, so no schedule
/// is joined to order by it, which would make every claim sort every due run), plus the runs
/// other rounds hold ahead of them: those are skipped before any schedule is read
/// (`claim_sql`). A claim in a region reads the schedule of each run not yet past
/// `others_after` to learn its region.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn claim(
    tx: &mut PgConnection,
    now: DateTime<Utc>,
    due_by: DateTime<Utc>,
    launch_deadline_s: f64,
    limit: i64,
    scope: &ClaimScope,
) -> Result<Vec<Claimed>> {
    // Invariant "the database clock decides": `now` is the database's clock (read by the
    // caller in this transaction). `for update of r skip locked`: another dispatcher's batch
    // is skipped, never waited for, and the locks die with this transaction (invariant
    // "claims die with their holder").
    // The priorities come in as an array (read in this statement's snapshot, so a run it
    // sees has its priority there): with `= any` on the index's first column, each
    // priority's entries are read from `$6` on, still in the index's order.
    let after = if scope.after.is_some() {
        "and r.priority = any (array(select priority from run_priorities)) \
           and r.fire_at > $6 "
    } else {
        "and $6::timestamptz is null "
    };
    let in_region = if scope.region.is_some() {
        // A run without any region coalesces to this instance's own.
        "and (r.fire_at <= $1 - make_interval(secs => $8) \
           or coalesce(r.launch_region, (select s.region from schedules s \
             where s.schedule_id = r.schedule_id), $7) = $7) "
    } else {
        ""
    };
    let sql = claim_sql(&format!(
        "r.status in {AWAITING_LAUNCH} and r.fire_at <= $4 \
           and (r.launch_region is null or not (r.launch_region = any ($5::text[]))) \
           and {NOT_HELD_AT_SNAPSHOT} \
           {after}{in_region}\
         order by r.priority desc, r.fire_at, r.idempotency_key limit $3",
        AWAITING_LAUNCH = *AWAITING_LAUNCH
    ));
    let mut query = sqlx::query_as::<_, ClaimedRow>(&sql)
        .bind(now)
        .bind(launch_deadline_s)
        .bind(limit)
        .bind(due_by)
        .bind(&scope.unavailable)
        .bind(scope.after);
    if let Some(region) = &scope.region {
        query = query.bind(region).bind(scope.others_after.as_secs_f64());
    }
    let rows = query.fetch_all(&mut *tx).await?;
    Ok(rows.into_iter().map(Claimed::from).collect())
}

/// Bounds how long PostgreSQL keeps this transaction's locks once its client stops talking
/// (cut off, frozen, killed without closing its connection): the session ends after `idle`
/// idle in the transaction, which rolls back and frees its claimed runs for other
/// instances. For the rest of this transaction only.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn bound_idle(tx: &mut PgConnection, idle: Duration) -> Result<()> {
    sqlx::query("select set_config('idle_in_transaction_session_timeout', $1, true)")
        .bind(format!("{}ms", idle.as_millis().max(1)))
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Locks one `PENDING` run by key, whatever its `fire_at` (the run launcher publishes at
/// once). `None` when it is not `PENDING` or another transaction holds it.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn claim_key(
    tx: &mut PgConnection,
    key: &str,
    now: DateTime<Utc>,
    launch_deadline_s: f64,
) -> Result<Option<Claimed>> {
    let sql = claim_sql("r.status = 'PENDING' and r.idempotency_key = $3");
    let row: Option<ClaimedRow> = sqlx::query_as(&sql)
        .bind(now)
        .bind(launch_deadline_s)
        .bind(key)
        .fetch_optional(&mut *tx)
        .await?;
    Ok(row.map(Claimed::from))
}
