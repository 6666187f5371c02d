//! `HashKV` equals etcd 3.4's for the same history. The expected values were answered by a
//! real etcd 3.4.23 (`etcdctl endpoint hashkv [--rev=N]`) after the same requests from an
//! empty store; `tests/etcd/etcdctl_compat.rs` compares against a live etcd as well.
use crate::common::*;
use k3rs_storage::*;

fn txn_put(pairs: &[(&str, &str)]) -> Command {
    Command::Txn(TxnRequest {
        compare: Vec::new(),
        success: pairs
            .iter()
            .map(|(k, v)| RequestOp::Put(put_req(k, v)))
            .collect(),
        failure: Vec::new(),
    })
}

fn hash(s: &Store, rev: i64) -> Result<(u32, i64, i64), RequestError> {
    s.hash_kv(rev)
        .unwrap()
        .map(|h| (h.hash, h.current_revision, h.compact_revision))
}

#[test]
fn hash_kv_matches_etcd_3_4_through_puts_deletes_txns_and_compactions() {
    let (_d, s) = open();
    assert_eq!(hash(&s, 0), Ok((1084519789, 1, -1)));
    apply(&s, put("a", "1")); // 2
    apply(&s, put("b", "2")); // 3
    apply(&s, put("a", "3")); // 4
    apply(&s, del("b", "")); // 5
    apply(&s, txn_put(&[("c", "1"), ("d", "2")])); // 6, subs 0 and 1
    assert_eq!(hash(&s, 0), Ok((1915754133, 6, -1)));
    assert_eq!(hash(&s, 6), Ok((1915754133, 6, -1)));
    assert_eq!(hash(&s, 3), Ok((1827592406, 6, -1)));

    apply(&s, Command::Compact { revision: 4 });
    assert_eq!(hash(&s, 0), Ok((3704050344, 6, 4)));
    assert_eq!(hash(&s, 5), Ok((1468967122, 6, 4)));
    assert_eq!(
        hash(&s, 4),
        Err(RequestError::Compacted {
            compact_revision: 4
        })
    );
    assert_eq!(hash(&s, 9), Err(RequestError::FutureRevision));

    apply(&s, put("a", "4")); // 7
    apply(&s, del("c", "")); // 8
    assert_eq!(hash(&s, 0), Ok((3380067262, 8, 4)));
    apply(&s, Command::Compact { revision: 7 });
    assert_eq!(hash(&s, 0), Ok((2969037195, 8, 7)));
    // No key left: etcd counts every record below the compaction (its `len(keep) > 0`).
    apply(&s, del("a", "")); // 9
    apply(&s, del("d", "")); // 10
    assert_eq!(hash(&s, 0), Ok((3629756795, 10, 7)));
}

#[test]
fn hashes_survive_reopen_and_defragmentation_and_follow_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    for i in 0..50 {
        apply(&s, put(&format!("k{}", i % 7), &format!("v{i}")));
    }
    apply(&s, Command::LeaseGrant { id: 9, ttl: 30 });
    apply(&s, Command::Compact { revision: 40 });
    let (kv, all) = (hash(&s, 0).unwrap(), s.hash().unwrap());
    s.defragment().unwrap();
    assert_eq!((hash(&s, 0).unwrap(), s.hash().unwrap()), (kv, all));
    drop(s);
    let s = Store::open(dir.path()).unwrap();
    assert_eq!((hash(&s, 0).unwrap(), s.hash().unwrap()), (kv, all));
    // Leases count in Hash, not in HashKV.
    apply(&s, Command::LeaseRevoke { id: 9 });
    assert_eq!(hash(&s, 0).unwrap(), kv);
    assert_ne!(s.hash().unwrap().1, all.1);
    apply(&s, put("k1", "changed"));
    assert_ne!(hash(&s, 0).unwrap().0, kv.0);
}
