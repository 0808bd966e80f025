//! The status stream's partitions shared among the members of the status role: evenly,
//! never one partition to two members, taken over when a member stops renewing, handed on
//! when a member leaves, and none beyond the configured count.

use std::collections::HashSet;
use std::time::Duration;

use kairos_store::status_partitions::{keep, leave};
use kairos_testkit::TestDb;
use sqlx::PgPool;

const LEASE: Duration = Duration::from_secs(30);

/// Every member renews `rounds` times, in turn; what each holds after the last round.
async fn rounds(pool: &PgPool, members: &[&str], partitions: u16, n: usize) -> Vec<Vec<u16>> {
    let mut held = vec![Vec::new(); members.len()];
    for _ in 0..n {
        for (i, member) in members.iter().enumerate() {
            held[i] = keep(pool, member, partitions, LEASE).await.expect("keep");
        }
    }
    held
}

/// No partition held twice; every one of `0..partitions` held.
fn assert_disjoint_cover(held: &[Vec<u16>], partitions: u16) {
    let mut seen = HashSet::new();
    for partition in held.iter().flatten() {
        assert!(
            seen.insert(*partition),
            "partition {partition} held twice: {held:?}"
        );
    }
    assert_eq!(seen, (0..partitions).collect::<HashSet<_>>(), "{held:?}");
}

#[tokio::test]
async fn members_share_the_partitions_evenly_and_hand_them_on() {
    let db = TestDb::new().await;
    let pool = db.pool();

    let alone = keep(&pool, "a", 16, LEASE).await.expect("keep");
    assert_eq!(
        alone,
        (0..16).collect::<Vec<_>>(),
        "a member alone holds every partition"
    );

    // A second and a third member join: the first gives back what is over its share and
    // the others take it, within two rounds.
    let held = rounds(&pool, &["a", "b", "c"], 16, 2).await;
    assert_disjoint_cover(&held, 16);
    for partitions in &held {
        assert!(partitions.len() <= 6, "at most ⌈16/3⌉ each: {held:?}");
    }

    // A member leaving hands its partitions on at the others' next renewal.
    leave(&pool, "c").await.expect("leave");
    let held = rounds(&pool, &["a", "b"], 16, 2).await;
    assert_disjoint_cover(&held, 16);
    assert_eq!(held[0].len(), 8, "{held:?}");
    assert_eq!(held[1].len(), 8, "{held:?}");

    // Fewer partitions configured: those beyond the count are no one's.
    let held = rounds(&pool, &["a", "b"], 4, 2).await;
    assert_disjoint_cover(&held, 4);
    let rows: i64 = sqlx::query_scalar("select count(*) from status_partitions")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(rows, 4);
}

#[tokio::test]
async fn a_member_that_stops_renewing_loses_its_partitions_to_the_others() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let short = Duration::from_secs(3);
    for _ in 0..2 {
        for member in ["a", "b"] {
            keep(&pool, member, 8, short).await.expect("keep");
        }
    }
    let before = keep(&pool, "a", 8, short).await.expect("keep");
    assert_eq!(before.len(), 4, "{before:?}");

    // "b" dies: nothing renews its membership or its leases. Until they run out, "a"
    // takes none of its partitions.
    let still = keep(&pool, "a", 8, short).await.expect("keep");
    assert_eq!(still, before);
    tokio::time::sleep(short + Duration::from_millis(300)).await;
    let after = keep(&pool, "a", 8, short).await.expect("keep");
    assert_eq!(
        after,
        (0..8).collect::<Vec<_>>(),
        "every partition, once b's leases ran out"
    );
    let members: Vec<String> = sqlx::query_scalar("select member from status_members")
        .fetch_all(&pool)
        .await
        .expect("members");
    assert_eq!(
        members,
        vec!["a".to_string()],
        "the dead member's row is gone"
    );
}
