//! Where an executor reports a run's status. Every launch message names it
//! (`status_subject`): `<prefix>.status.<key>` on a stream that is not partitioned, and
//! `<prefix>.status.<p>.<key>` on one with `N` partitions, where `p` is the partition the
//! NATS server's mapping `{{partition(N,1)}}` gives the key. So every report of a run
//! reaches the one instance reading partition `p`, whether its executor publishes on the
//! subject named in the launch or on `<prefix>.status.<key>` through the server's mapping,
//! and no server configuration is needed for executors that use the named subject.

/// Where a deployment's launch messages tell executors to report: its subject prefix and
/// its status stream's partitions (`nats.status_partitions`, 0: not partitioned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSubjects {
    /// `nats.subject_prefix`.
    pub prefix: String,
    /// `nats.status_partitions`.
    pub partitions: u16,
}

impl StatusSubjects {
    /// The subject the executor of run `key` reports on.
    #[must_use]
    pub fn of(&self, key: &str) -> String {
        status_subject(&self.prefix, key, self.partitions)
    }
}

/// The subject the executor of run `key` reports on, with the status stream split into
/// `partitions` (0: not partitioned).
#[must_use]
pub fn status_subject(prefix: &str, key: &str, partitions: u16) -> String {
    if partitions == 0 {
        format!("{prefix}.status.{key}")
    } else {
        format!("{prefix}.status.{}.{key}", partition_of(key, partitions))
    }
}

/// The partition of run `key` among `partitions` (at least 1), as the NATS server's
/// `partition(N,1)` computes it: FNV-1a (32 bits) of the key, modulo `N`.
#[must_use]
pub fn partition_of(key: &str, partitions: u16) -> u16 {
    const OFFSET: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;
    let hash = key.bytes().fold(OFFSET, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(PRIME)
    });
    // Invariant: the remainder is below `partitions`, a u16.
    u16::try_from(hash % u32::from(partitions.max(1))).expect("below a u16")
}

#[cfg(test)]
mod tests {
    use super::{partition_of, status_subject};

    #[test]
    fn a_key_hashes_as_fnv1a() {
        // FNV-1a 32 of "a" is 0xe40c292c; of "" the offset basis 0x811c9dc5.
        assert_eq!(partition_of("a", 1000), (0xe40c_292c_u32 % 1000) as u16);
        assert_eq!(partition_of("", 7), (0x811c_9dc5_u32 % 7) as u16);
    }

    #[test]
    fn the_subject_names_the_partition_only_when_there_are_partitions() {
        assert_eq!(status_subject("kairos", "k1", 0), "kairos.status.k1");
        let p = partition_of("k1", 12);
        assert!(p < 12);
        assert_eq!(
            status_subject("kairos", "k1", 12),
            format!("kairos.status.{p}.k1")
        );
    }
}
