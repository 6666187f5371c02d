//! Lease grant/revoke and key attachment.
use crate::common::*;
use k3rs_storage::*;

fn leased(k: &str, lease: i64) -> Command {
    Command::Put(PutRequest {
        lease,
        ..put_req(k, "v")
    })
}

#[test]
fn grant_revoke_and_attached_keys() {
    let (_d, s) = open();
    assert_eq!(
        apply(&s, Command::LeaseGrant { id: 5, ttl: 30 }).result,
        Ok(CommandResponse::LeaseGrant { id: 5, ttl: 30 })
    );
    assert_eq!(
        apply(&s, Command::LeaseGrant { id: 5, ttl: 30 }).result,
        Err(RequestError::LeaseExists)
    );
    let auto = match apply(&s, Command::LeaseGrant { id: 0, ttl: 7 }).result {
        Ok(CommandResponse::LeaseGrant { id, ttl: 7 }) => id,
        other => panic!("{other:?}"),
    };
    assert!(auto > 0 && auto != 5);
    apply(&s, leased("b", 5));
    apply(&s, leased("a", 5));
    apply(&s, leased("c", auto));
    apply(&s, leased("c", 5)); // moves c from `auto` to 5
    assert_eq!(
        s.lease(5).unwrap().unwrap().keys,
        vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
    );
    assert_eq!(s.lease(auto).unwrap().unwrap().keys, Vec::<Vec<u8>>::new());
    apply(&s, del("b", ""));
    assert_eq!(
        s.lease(5).unwrap().unwrap().keys,
        vec![b"a".to_vec(), b"c".to_vec()]
    );
    assert_eq!(s.current_revision(), 6);
    // Revoke deletes the keys in one revision.
    let out = apply(&s, Command::LeaseRevoke { id: 5 });
    assert_eq!(
        (out.revision, out.result),
        (7, Ok(CommandResponse::LeaseRevoke))
    );
    assert_eq!(get(&s, "a"), None);
    assert_eq!(get(&s, "c"), None);
    assert_eq!(s.lease(5).unwrap(), None);
    // A lease without keys: no revision.
    assert_eq!(apply(&s, Command::LeaseRevoke { id: auto }).revision, 7);
    assert_eq!(
        apply(&s, Command::LeaseRevoke { id: auto }).result,
        Err(RequestError::LeaseNotFound)
    );
    assert!(s.leases().unwrap().is_empty());
}

#[test]
fn leases_survive_reopen_and_ids_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let ids = |s: &Store| -> Vec<i64> {
        (0..3)
            .map(
                |_| match apply(s, Command::LeaseGrant { id: 0, ttl: 1 }).result {
                    Ok(CommandResponse::LeaseGrant { id, .. }) => id,
                    other => panic!("{other:?}"),
                },
            )
            .collect()
    };
    let first = {
        let s = Store::open(dir.path()).unwrap();
        let v = ids(&s);
        apply(&s, leased("k", v[1]));
        v
    };
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(
        s.lease(first[1]).unwrap().unwrap().keys,
        vec![b"k".to_vec()]
    );
    let more = ids(&s);
    let (_d2, other) = open();
    let again = ids(&other);
    assert_eq!(first, again);
    assert!(more.iter().all(|id| !first.contains(id)));
}
