//! Alarms: raised and cleared as etcd's alarm store, kept across reopen and snapshots, and
//! the writes a raised alarm refuses.
use crate::common::*;
use k3rs_storage::*;

fn alarm(action: AlarmAction, member_id: u64, alarm: AlarmType) -> Command {
    Command::Alarm {
        action,
        member_id,
        alarm,
    }
}

fn member(member_id: u64, alarm: AlarmType) -> AlarmMember {
    AlarmMember { member_id, alarm }
}

fn answered(out: Output) -> Vec<AlarmMember> {
    match out.result {
        Ok(CommandResponse::Alarm { alarms }) => alarms,
        other => panic!("alarm answered {other:?}"),
    }
}

#[test]
fn activate_deactivate_and_list_as_etcd() {
    let (_d, s) = open();
    let nospace = member(7, AlarmType::Nospace);
    let out = apply(&s, alarm(AlarmAction::Activate, 7, AlarmType::Nospace));
    assert_eq!(out.revision, 1, "alarms do not move the revision");
    assert_eq!(answered(out), vec![nospace]);
    // Raising it again answers it again; NONE is never raised.
    assert_eq!(
        answered(apply(
            &s,
            alarm(AlarmAction::Activate, 7, AlarmType::Nospace)
        )),
        vec![nospace]
    );
    assert_eq!(
        answered(apply(&s, alarm(AlarmAction::Activate, 7, AlarmType::None))),
        vec![]
    );
    apply(&s, alarm(AlarmAction::Activate, 3, AlarmType::Corrupt));
    assert_eq!(
        s.alarms(AlarmType::None),
        vec![nospace, member(3, AlarmType::Corrupt)]
    );
    assert_eq!(s.alarms(AlarmType::Nospace), vec![nospace]);
    // Deactivation needs the exact member and type.
    assert_eq!(
        answered(apply(
            &s,
            alarm(AlarmAction::Deactivate, 8, AlarmType::Nospace)
        )),
        vec![]
    );
    assert_eq!(
        answered(apply(
            &s,
            alarm(AlarmAction::Deactivate, 3, AlarmType::Corrupt)
        )),
        vec![member(3, AlarmType::Corrupt)]
    );
    assert_eq!(s.alarms(AlarmType::None), vec![nospace]);
}

#[test]
fn nospace_refuses_puts_until_disarmed_and_lets_space_be_reclaimed() {
    let (_d, s) = open();
    apply(&s, put("a", "1")); // 2
    apply(&s, alarm(AlarmAction::Activate, 1, AlarmType::Nospace));
    let refused = apply(&s, put("a", "2"));
    assert_eq!(
        (refused.revision, refused.result),
        (2, Err(RequestError::NoSpace))
    );
    assert_eq!(
        apply(&s, Command::LeaseGrant { id: 5, ttl: 10 }).result,
        Err(RequestError::NoSpace)
    );
    // Reads, deletes and compaction go on.
    assert_eq!(get(&s, "a"), Some(kv("a", "1", 2, 2, 1)));
    assert_eq!(apply(&s, del("a", "")).revision, 3);
    assert_eq!(
        apply(&s, Command::Compact { revision: 3 }).result,
        Ok(CommandResponse::Compact)
    );
    s.defragment().unwrap();
    apply(&s, alarm(AlarmAction::Deactivate, 1, AlarmType::Nospace));
    assert_eq!(apply(&s, put("a", "3")).revision, 4);
}

#[test]
fn corrupt_refuses_every_change() {
    let (_d, s) = open();
    apply(&s, put("a", "1"));
    apply(&s, alarm(AlarmAction::Activate, 2, AlarmType::Corrupt));
    for cmd in [
        put("b", "1"),
        del("a", ""),
        Command::Compact { revision: 2 },
        Command::LeaseRevoke { id: 1 },
    ] {
        assert_eq!(apply(&s, cmd).result, Err(RequestError::Corrupt));
    }
    assert_eq!(get(&s, "a"), Some(kv("a", "1", 2, 2, 1)));
    let read_only = Command::Txn(TxnRequest {
        compare: Vec::new(),
        success: vec![RequestOp::Range(RangeRequest {
            key: "a".into(),
            ..Default::default()
        })],
        failure: Vec::new(),
    });
    assert!(apply(&s, read_only).result.is_ok());
}

#[test]
fn alarms_survive_reopen_and_travel_in_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    apply(&s, alarm(AlarmAction::Activate, 11, AlarmType::Nospace));
    apply(&s, alarm(AlarmAction::Activate, 12, AlarmType::Corrupt));
    apply(&s, alarm(AlarmAction::Deactivate, 12, AlarmType::Corrupt));
    s.flush().unwrap();
    drop(s);
    let s = Store::open(dir.path()).unwrap();
    let raised = vec![member(11, AlarmType::Nospace)];
    assert_eq!(s.alarms(AlarmType::None), raised);
    assert_eq!(apply(&s, put("a", "1")).result, Err(RequestError::NoSpace));

    let mut snap = Vec::new();
    s.export_snapshot(&mut snap).unwrap();
    let (_d2, other) = open();
    other.import_snapshot(&mut snap.as_slice()).unwrap();
    assert_eq!(other.alarms(AlarmType::None), raised);
    s.defragment().unwrap();
    assert_eq!(s.alarms(AlarmType::None), raised);
}
