//! The partitions of the status stream, shared among the instances that run the status
//! role. Each member renews its own row in `status_members` and its leases in
//! `status_partitions`; the live members share the partitions evenly (a member holds at most
//! ⌈partitions / members⌉). A member over its share gives back its highest partitions; a
//! member under it takes free ones, or those whose owner stopped renewing. Two members that
//! reach for one partition at once are told apart by its primary key: one takes it.
//!
//! A partition consumed by two members for a moment (one giving it back, one taking it) is
//! harmless: the intake locks each run it writes, so the lease only decides where a run's
//! reports usually go, never whether they apply.

use std::time::Duration;

use sqlx::PgPool;

use crate::Result;

/// Renews `member` and its leases for `ttl`, gives back what is over its share of
/// `partitions` (numbered `0..partitions`), takes free ones up to its share, and returns the
/// partitions it holds now, in order. One transaction.
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails (nothing changed).
pub async fn keep(pool: &PgPool, member: &str, partitions: u16, ttl: Duration) -> Result<Vec<u16>> {
    let ttl_s = ttl.as_secs_f64();
    let partitions = i32::from(partitions);
    let mut tx = pool.begin().await?;
    sqlx::query(
        "insert into status_members (member, seen_until) \
         values ($1, now() + make_interval(secs => $2)) \
         on conflict (member) do update set seen_until = excluded.seen_until",
    )
    .bind(member)
    .bind(ttl_s)
    .execute(&mut *tx)
    .await?;
    let members: i64 = sqlx::query_scalar(
        "with gone as (delete from status_members where seen_until < now()) \
         select count(*) from status_members where seen_until >= now()",
    )
    .fetch_one(&mut *tx)
    .await?;
    let members = i32::try_from(members.max(1)).unwrap_or(i32::MAX);
    let share = (partitions + members - 1) / members;
    let mut held: Vec<i32> = sqlx::query_scalar(
        "update status_partitions set lease_until = now() + make_interval(secs => $2) \
         where owner = $1 and partition < $3 returning partition",
    )
    .bind(member)
    .bind(ttl_s)
    .bind(partitions)
    .fetch_all(&mut *tx)
    .await?;
    held.sort_unstable();
    let share = usize::try_from(share).unwrap_or(0);
    let over = held.len().saturating_sub(share);
    if over > 0 {
        let given: Vec<i32> = held.split_off(held.len() - over);
        sqlx::query("delete from status_partitions where owner = $1 and partition = any($2)")
            .bind(member)
            .bind(&given)
            .execute(&mut *tx)
            .await?;
    }
    // Partitions beyond the count (left by a larger `nats.status_partitions`) are no one's.
    sqlx::query("delete from status_partitions where partition >= $1")
        .bind(partitions)
        .execute(&mut *tx)
        .await?;
    let want = share.saturating_sub(held.len());
    if want > 0 {
        let taken: Vec<i32> = sqlx::query_scalar(
            "insert into status_partitions (partition, owner, lease_until) \
             select p, $1, now() + make_interval(secs => $2) \
             from generate_series(0, $3 - 1) as p \
             where not exists (select 1 from status_partitions s \
                               where s.partition = p and s.lease_until >= now()) \
             order by p limit $4 \
             on conflict (partition) do update \
               set owner = excluded.owner, lease_until = excluded.lease_until \
               where status_partitions.lease_until < now() \
             returning partition",
        )
        .bind(member)
        .bind(ttl_s)
        .bind(partitions)
        .bind(i64::try_from(want).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await?;
        held.extend(taken);
        held.sort_unstable();
    }
    tx.commit().await?;
    Ok(held
        .into_iter()
        .filter_map(|p| u16::try_from(p).ok())
        .collect())
}

/// Gives back every partition of `member` and its membership (a clean shutdown), so the
/// others take them at their next renewal instead of after the lease.
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails.
pub async fn leave(pool: &PgPool, member: &str) -> Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("delete from status_partitions where owner = $1")
        .bind(member)
        .execute(&mut *tx)
        .await?;
    sqlx::query("delete from status_members where member = $1")
        .bind(member)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}
