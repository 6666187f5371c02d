//! Who is corrupt when hashes differ: etcd's `checkPeerHashes` (`server/etcdserver/corrupt.go`,
//! the rule of its compaction hash check, 3.5.7+ and 3.6): group the members by hash, the group
//! holding a quorum of all members is right, and every member outside it is corrupt. That names
//! the *leader* when its own data is the one that differs, which etcd's first-differing-peer rule
//! (`periodic::decide`) cannot.
//!
//! # Guarantees
//! - Only hashes taken at the leader's compaction are compared; a peer that did not answer or is
//!   compacted differently is skipped, but still counts in the member total the quorum is taken
//!   of (`peers asked + 1`), as in etcd.
//! - All agree: [`Verdict::Consistent`]. A quorum agrees: [`Verdict::Corrupt`] names every
//!   member outside it (the leader included, if it is). No group holds a quorum:
//!   [`Verdict::Unidentified`]; etcd raises CORRUPT for member 0 then (the whole cluster).

use k3rs_storage::KvHash;

use super::PeerHash;

/// The outcome of comparing the leader's hash with its peers'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every compared member has the leader's hash.
    Consistent {
        /// How many peers were compared (the rest were skipped).
        checked: usize,
    },
    /// A quorum agrees; these members (ascending ids) do not.
    Corrupt(Vec<u64>),
    /// Hashes differ and no hash is held by a quorum: which side is wrong is unknown.
    Unidentified,
}

impl Verdict {
    /// The member ids to raise CORRUPT for: the corrupt members, or member 0 (the whole
    /// cluster, as etcd) when they cannot be told.
    pub fn alarms(&self) -> Vec<u64> {
        match self {
            Verdict::Consistent { .. } => Vec::new(),
            Verdict::Corrupt(ids) => ids.clone(),
            Verdict::Unidentified => vec![0],
        }
    }
}

/// etcd's `checkPeerHashes`: `leader` is the leader's hash (at some revision), `answers` the
/// peers that answered for that revision, `asked` how many peers were asked (the members
/// besides the leader, answering or not).
pub fn check_peer_hashes(
    leader_id: u64,
    leader: KvHash,
    answers: &[PeerHash],
    asked: usize,
) -> Verdict {
    // (hash, members), the leader's first.
    let mut groups: Vec<(u32, Vec<u64>)> = vec![(leader.hash, vec![leader_id])];
    let mut checked = 0;
    for p in answers
        .iter()
        .filter(|p| p.compact_revision == leader.compact_revision)
    {
        checked += 1;
        match groups.iter_mut().find(|(h, _)| *h == p.hash) {
            Some((_, ids)) => ids.push(p.member_id),
            None => groups.push((p.hash, vec![p.member_id])),
        }
    }
    if groups.len() == 1 {
        return Verdict::Consistent { checked };
    }
    let members = asked.max(answers.len()) + 1;
    let quorum = members / 2 + 1;
    let Some(majority) = groups.iter().position(|(_, ids)| ids.len() >= quorum) else {
        return Verdict::Unidentified;
    };
    groups.remove(majority);
    let mut corrupt: Vec<u64> = groups.into_iter().flat_map(|(_, ids)| ids).collect();
    corrupt.sort_unstable();
    Verdict::Corrupt(corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEADER: u64 = 1;

    fn leader(hash: u32) -> KvHash {
        KvHash {
            hash,
            current_revision: 10,
            compact_revision: 4,
        }
    }

    fn peer(member_id: u64, compact: i64, hash: u32) -> PeerHash {
        PeerHash {
            member_id,
            revision: 10,
            compact_revision: compact,
            hash,
        }
    }

    #[test]
    fn table() {
        // (case, leader hash, answers, asked, verdict)
        let cases: Vec<(&str, u32, Vec<PeerHash>, usize, Verdict)> = vec![
            (
                "all agree",
                7,
                vec![peer(2, 4, 7), peer(3, 4, 7)],
                2,
                Verdict::Consistent { checked: 2 },
            ),
            (
                "a single member",
                7,
                vec![],
                0,
                Verdict::Consistent { checked: 0 },
            ),
            (
                "a corrupted follower",
                7,
                vec![peer(2, 4, 7), peer(3, 4, 9)],
                2,
                Verdict::Corrupt(vec![3]),
            ),
            (
                "a corrupted leader: both followers agree against it",
                8,
                vec![peer(2, 4, 7), peer(3, 4, 7)],
                2,
                Verdict::Corrupt(vec![LEADER]),
            ),
            (
                "three different hashes: no quorum",
                7,
                vec![peer(2, 4, 8), peer(3, 4, 9)],
                2,
                Verdict::Unidentified,
            ),
            (
                "one peer down: 1 against 1 of 3 is no quorum",
                8,
                vec![peer(2, 4, 7)],
                2,
                Verdict::Unidentified,
            ),
            (
                "a peer compacted differently is skipped",
                7,
                vec![peer(2, 4, 7), peer(3, 5, 9)],
                2,
                Verdict::Consistent { checked: 1 },
            ),
            (
                "five members, a corrupted leader and follower",
                8,
                vec![peer(2, 4, 7), peer(3, 4, 7), peer(4, 4, 7), peer(5, 4, 8)],
                4,
                Verdict::Corrupt(vec![LEADER, 5]),
            ),
            (
                "five members, two down: the leader agrees with one, one differs",
                7,
                vec![peer(2, 4, 7), peer(3, 4, 9)],
                4,
                Verdict::Unidentified,
            ),
            (
                "five members, one down: a quorum of three agrees against the leader",
                8,
                vec![peer(2, 4, 7), peer(3, 4, 7), peer(4, 4, 7)],
                4,
                Verdict::Corrupt(vec![LEADER]),
            ),
        ];
        for (name, hash, answers, asked, want) in cases {
            assert_eq!(
                check_peer_hashes(LEADER, leader(hash), &answers, asked),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn alarms_name_the_corrupt_members_or_the_whole_cluster() {
        assert_eq!(
            Verdict::Consistent { checked: 2 }.alarms(),
            Vec::<u64>::new()
        );
        assert_eq!(Verdict::Corrupt(vec![1, 5]).alarms(), vec![1, 5]);
        assert_eq!(Verdict::Unidentified.alarms(), vec![0]);
    }
}
