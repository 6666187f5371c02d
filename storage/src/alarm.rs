//! Alarms (etcd's alarm store and its "capped" and "corrupt" appliers): which members have
//! which alarm raised, and which commands a raised alarm refuses.
//!
//! # Guarantees
//! - Alarms are state-machine data: raised and cleared by [`Command::Alarm`] in log order,
//!   persisted with the batch, carried in snapshots, identical on every member.
//! - While NOSPACE is raised, `Put`, a `Txn` with a put among its top-level operations and
//!   `LeaseGrant` fail with [`RequestError::NoSpace`] (etcd's `applierV3Capped`, whose txn
//!   check is the quota's cost: top-level puts only). Reads, deletes, compaction and lease
//!   revocation go on.
//! - While CORRUPT is raised, every command that changes data fails with
//!   [`RequestError::Corrupt`] (etcd's `applierV3Corrupt`); read-only txns go on, as etcd
//!   serves them without Raft.

use std::collections::BTreeSet;

use crate::types::{
    AlarmAction, AlarmMember, AlarmType, Command, CommandResponse, RequestError, RequestOp,
};
use crate::writer::Writer;

/// Applies `Command::Alarm` as etcd's `applierV3backend.Alarm` does: activating an alarm
/// that is raised already answers it again; deactivating one that is not raised answers
/// nothing; `AlarmType::None` is never raised.
pub(crate) fn apply(
    w: &mut Writer<'_>,
    action: AlarmAction,
    member_id: u64,
    alarm: AlarmType,
) -> CommandResponse {
    let m = AlarmMember { member_id, alarm };
    let alarms = match action {
        AlarmAction::Activate if alarm == AlarmType::None => Vec::new(),
        AlarmAction::Activate => {
            if w.st.alarms.insert(m) {
                w.alarm_writes.insert(m, true);
            }
            vec![m]
        }
        AlarmAction::Deactivate => {
            if w.st.alarms.remove(&m) {
                w.alarm_writes.insert(m, false);
                vec![m]
            } else {
                Vec::new()
            }
        }
    };
    CommandResponse::Alarm { alarms }
}

/// The raised alarms of type `alarm` (`None`: every type), ordered by type then member.
pub(crate) fn list(alarms: &BTreeSet<AlarmMember>, alarm: AlarmType) -> Vec<AlarmMember> {
    let mut out: Vec<AlarmMember> = alarms
        .iter()
        .filter(|m| alarm == AlarmType::None || m.alarm == alarm)
        .copied()
        .collect();
    out.sort_by_key(|m| (m.alarm, m.member_id));
    out
}

/// Why the raised `alarms` refuse `cmd`, if they do.
pub(crate) fn refusal(alarms: &BTreeSet<AlarmMember>, cmd: &Command) -> Option<RequestError> {
    let raised = |t: AlarmType| alarms.iter().any(|m| m.alarm == t);
    if raised(AlarmType::Corrupt) && changes_data(cmd) {
        return Some(RequestError::Corrupt);
    }
    if raised(AlarmType::Nospace) && adds_data(cmd) {
        return Some(RequestError::NoSpace);
    }
    None
}

/// What etcd's corrupt applier refuses: everything but alarms and read-only txns.
fn changes_data(cmd: &Command) -> bool {
    match cmd {
        Command::Txn(t) => !t
            .success
            .iter()
            .chain(&t.failure)
            .all(|op| matches!(op, RequestOp::Range(_))),
        Command::Alarm { .. } => false,
        Command::Put(_)
        | Command::DeleteRange(_)
        | Command::Compact { .. }
        | Command::LeaseGrant { .. }
        | Command::LeaseRevoke { .. } => true,
    }
}

/// What etcd's capped applier refuses: puts, txns whose quota cost is not zero, lease grants.
fn adds_data(cmd: &Command) -> bool {
    match cmd {
        Command::Put(_) | Command::LeaseGrant { .. } => true,
        Command::Txn(t) => t
            .success
            .iter()
            .chain(&t.failure)
            .any(|op| matches!(op, RequestOp::Put(_))),
        Command::DeleteRange(_)
        | Command::Compact { .. }
        | Command::LeaseRevoke { .. }
        | Command::Alarm { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DeleteRangeRequest, PutRequest, RangeRequest, TxnRequest};

    fn set(alarms: &[(u64, AlarmType)]) -> BTreeSet<AlarmMember> {
        alarms
            .iter()
            .map(|&(member_id, alarm)| AlarmMember { member_id, alarm })
            .collect()
    }

    fn txn(success: Vec<RequestOp>, failure: Vec<RequestOp>) -> Command {
        Command::Txn(TxnRequest {
            compare: Vec::new(),
            success,
            failure,
        })
    }

    fn put() -> RequestOp {
        RequestOp::Put(PutRequest::default())
    }

    fn get() -> RequestOp {
        RequestOp::Range(RangeRequest::default())
    }

    fn del() -> RequestOp {
        RequestOp::DeleteRange(DeleteRangeRequest::default())
    }

    #[test]
    fn nospace_refuses_what_adds_data() {
        let a = set(&[(7, AlarmType::Nospace)]);
        let refused = |c: &Command| refusal(&a, c);
        assert_eq!(
            refused(&Command::Put(PutRequest::default())),
            Some(RequestError::NoSpace)
        );
        assert_eq!(
            refused(&Command::LeaseGrant { id: 0, ttl: 5 }),
            Some(RequestError::NoSpace)
        );
        assert_eq!(
            refused(&txn(vec![get()], vec![put()])),
            Some(RequestError::NoSpace)
        );
        assert_eq!(refused(&txn(vec![get(), del()], vec![])), None);
        // etcd's cost counts top-level puts only.
        assert_eq!(
            refused(&txn(
                vec![RequestOp::Txn(TxnRequest {
                    success: vec![put()],
                    ..Default::default()
                })],
                vec![]
            )),
            None
        );
        assert_eq!(
            refused(&Command::DeleteRange(DeleteRangeRequest::default())),
            None
        );
        assert_eq!(refused(&Command::Compact { revision: 3 }), None);
        assert_eq!(refused(&Command::LeaseRevoke { id: 1 }), None);
    }

    #[test]
    fn corrupt_refuses_every_change_but_not_reads() {
        let a = set(&[(7, AlarmType::Nospace), (9, AlarmType::Corrupt)]);
        let refused = |c: &Command| refusal(&a, c);
        for c in [
            Command::Put(PutRequest::default()),
            Command::DeleteRange(DeleteRangeRequest::default()),
            Command::Compact { revision: 3 },
            Command::LeaseGrant { id: 0, ttl: 5 },
            Command::LeaseRevoke { id: 1 },
            txn(vec![get()], vec![del()]),
        ] {
            assert_eq!(refused(&c), Some(RequestError::Corrupt), "{c:?}");
        }
        assert_eq!(refused(&txn(vec![get()], vec![get()])), None);
        let clear = Command::Alarm {
            action: AlarmAction::Deactivate,
            member_id: 9,
            alarm: AlarmType::Corrupt,
        };
        assert_eq!(refused(&clear), None);
        assert_eq!(
            refusal(&set(&[]), &Command::Put(PutRequest::default())),
            None
        );
    }

    #[test]
    fn list_filters_by_type_in_a_stable_order() {
        let a = set(&[
            (9, AlarmType::Nospace),
            (3, AlarmType::Corrupt),
            (1, AlarmType::Nospace),
        ]);
        let members = |t| -> Vec<(u64, AlarmType)> {
            list(&a, t)
                .into_iter()
                .map(|m| (m.member_id, m.alarm))
                .collect()
        };
        assert_eq!(
            members(AlarmType::None),
            vec![
                (1, AlarmType::Nospace),
                (9, AlarmType::Nospace),
                (3, AlarmType::Corrupt)
            ]
        );
        assert_eq!(members(AlarmType::Corrupt), vec![(3, AlarmType::Corrupt)]);
    }
}
