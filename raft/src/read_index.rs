//! The index a linearizable read must wait for, on the leader.
//!
//! openraft's ReadIndex (`get_read_log_id`) is `max(committed, the leader's first entry of
//! its term)`. That is right for a leader elected in a new term: its blank entry comes after
//! everything committed before. But openraft 0.9 also *restores* a member as leader at startup
//! when its persisted vote says it was the leader of its (committed) term: then no blank entry
//! is written, "the first entry of its term" is an old one, and `committed` starts at the
//! state machine's applied index, which after a crash (sled loses its last unflushed batches)
//! lags behind writes that were committed and acknowledged before the crash. A read answered
//! at that index is stale.
//!
//! Guarantee: while the member leads the term it restarted in, reads also wait for the last
//! entry its log held at startup (its own log as the leader of that term: every entry
//! committed in that term is in it, and all of it gets committed as it replicates). In any
//! later term the new leader's blank entry covers the restart, so the floor no longer applies.

use crate::types::LogId;

/// What the log looked like when this process opened it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StartupFloor {
    /// The term of the persisted vote at startup.
    pub term: u64,
    /// The index of the last log entry at startup (0 for an empty log).
    pub last_index: u64,
}

/// The index the state machine must have applied before a read on the leader of
/// `current_term` may be served, given openraft's `read_log_id`.
pub fn read_index(read_log_id: Option<LogId>, current_term: u64, floor: StartupFloor) -> u64 {
    let read = read_log_id.map_or(0, |l| l.index);
    if current_term == floor.term {
        read.max(floor.last_index)
    } else {
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn log_id(term: u64, index: u64) -> Option<LogId> {
        Some(LogId::new(CommittedLeaderId::new(term, 1), index))
    }

    const RESTARTED: StartupFloor = StartupFloor {
        term: 7,
        last_index: 120,
    };

    #[test]
    fn a_leader_restored_in_its_term_waits_for_its_whole_startup_log() {
        // openraft answers the stale applied index (100) of the restored leader.
        assert_eq!(read_index(log_id(7, 100), 7, RESTARTED), 120);
        // Once the tail is committed, openraft's answer is the larger one.
        assert_eq!(read_index(log_id(7, 130), 7, RESTARTED), 130);
    }

    #[test]
    fn a_leader_of_a_later_term_uses_openrafts_read_index() {
        assert_eq!(read_index(log_id(8, 110), 8, RESTARTED), 110);
        assert_eq!(read_index(log_id(8, 121), 8, RESTARTED), 121);
    }

    #[test]
    fn an_empty_log_has_no_floor() {
        assert_eq!(read_index(None, 0, StartupFloor::default()), 0);
        assert_eq!(read_index(log_id(1, 3), 1, StartupFloor::default()), 3);
    }
}
