//! An etcd-format snapshot of a three-member k3rs cluster (`etcdctl snapshot save` from one
//! member) records the cluster as etcd keeps it: the `members` bucket holds every member
//! (hex ID key, `membership.Member` JSON), `meta` holds etcd 3.5's `term` and `confState`.
//! etcd 3.4 takes it: `snapshot status` counts it, and a real etcd restored from it serves the
//! keys as a cluster of one (`snapshot restore` writes the members of its flags). k3rs's own
//! restore (`--cluster-reset --cluster-reset-restore-path`) also makes a cluster of one, as
//! k3s's does.

use std::collections::BTreeMap;

use crate::common::etcdctl::members;
use crate::common::{etcdctl, Endpoint, Etcd, K3rs};

fn json(ep: &Endpoint, args: &[&str]) -> serde_json::Value {
    let out = etcdctl(ep, args, None).expect_ok(&args.join(" "));
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn get(ep: &Endpoint, key: &str) -> String {
    let out = etcdctl(ep, &["get", key, "--print-value-only"], None).expect_ok("get");
    out.stdout.trim().to_string()
}

#[test]
fn a_snapshot_of_three_members_records_them_and_restores_as_a_cluster_of_one() {
    let servers = K3rs::start_cluster(3, &["--etcd-auto-compaction-retention", "0"], &[]);
    let ep = servers[1].endpoint();
    for i in 0..10 {
        etcdctl(&ep, &["put", &format!("k{i}"), &format!("v{i}")], None).expect_ok("put");
    }
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap.db");
    let snap_arg = snap.to_str().unwrap();
    etcdctl(&ep, &["snapshot", "save", snap_arg], None).expect_ok("snapshot save");
    let status = json(&ep, &["endpoint", "status", "-w", "json"]);
    let (revision, term) = (
        status[0]["Status"]["header"]["revision"].as_i64().unwrap(),
        status[0]["Status"]["header"]["raft_term"].as_u64().unwrap(),
    );

    // The members, as `member list` shows them, are in the `members` bucket.
    let listed = json(&ep, &["member", "list", "-w", "json"]);
    let listed = listed["members"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 3, "{listed:?}");
    let mut data = std::fs::read(&snap).unwrap();
    assert_eq!(data.len() % 512, 32, "no sha256 trailer");
    data.truncate(data.len() - 32);
    let db = k3rs_bbolt::Database::parse(data).unwrap();
    let stored: BTreeMap<String, serde_json::Value> = db
        .bucket(b"members")
        .unwrap()
        .expect("a members bucket")
        .entries()
        .unwrap()
        .into_iter()
        .map(|(k, v)| {
            (
                String::from_utf8(k).unwrap(),
                serde_json::from_slice(&v).unwrap(),
            )
        })
        .collect();
    assert_eq!(stored.len(), 3, "{stored:?}");
    let mut voters = Vec::new();
    for m in &listed {
        let id = m["ID"].as_u64().unwrap();
        voters.push(id);
        let s = stored
            .get(&format!("{id:x}"))
            .unwrap_or_else(|| panic!("member {id:x} not in {stored:?}"));
        assert_eq!(s["id"].as_u64(), Some(id), "{s}");
        assert_eq!(s["name"], m["name"], "{s}");
        assert_eq!(s["peerURLs"], m["peerURLs"], "{s}");
        assert_eq!(s["clientURLs"], m["clientURLs"], "{s}");
        assert!(s.get("isLearner").is_none(), "{s}");
    }
    voters.sort_unstable();
    let meta: BTreeMap<Vec<u8>, Vec<u8>> = db
        .bucket(b"meta")
        .unwrap()
        .unwrap()
        .entries()
        .unwrap()
        .into_iter()
        .collect();
    let snap_term = u64::from_be_bytes(meta[&b"term".to_vec()][..].try_into().unwrap());
    assert!(
        snap_term >= 1 && snap_term <= term,
        "term {snap_term}, now {term}"
    );
    let conf: serde_json::Value = serde_json::from_slice(&meta[&b"confState".to_vec()]).unwrap();
    assert_eq!(
        conf,
        serde_json::json!({"voters": voters, "auto_leave": false})
    );

    // etcd 3.4 reads it: status, restore, serve, as a cluster of one.
    let st = json(&ep, &["snapshot", "status", snap_arg, "-w", "json"]);
    assert_eq!(st["revision"].as_i64(), Some(revision), "{st}");
    assert!(st["totalKey"].as_i64().unwrap() >= 10, "{st}");
    let etcd = Etcd::restore_and_start(&snap);
    let etcd_members = members(&etcd.endpoint()).unwrap();
    assert_eq!(etcd_members.len(), 1, "{etcd_members:?}");
    assert_eq!(get(&etcd.endpoint(), "k3"), "v3");

    // k3rs's restore on a fresh server: a cluster of one with the data.
    let mut fresh = K3rs::start();
    let status = fresh.run_once_with(
        &["--cluster-reset", "--cluster-reset-restore-path", snap_arg],
        std::time::Duration::from_secs(60),
    );
    assert!(status.is_some_and(|s| s.success()), "{}", fresh.log());
    fresh.restart();
    let m = members(&fresh.endpoint()).unwrap();
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(get(&fresh.endpoint(), "k3"), "v3");
    etcdctl(&fresh.endpoint(), &["put", "after", "restore"], None).expect_ok("put");
}
