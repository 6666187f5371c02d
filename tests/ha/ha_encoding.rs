//! End-to-end: a rolling switch to `--etcd-compact-encoding` (keys and values as MessagePack
//! bin in the Raft log, WAL and peer messages). Three servers start in the old form (integer
//! arrays); one at a time they restart with the flag. At every step, while members write
//! different forms, writes through each member (forwarded to the leader in the sender's form,
//! replicated in the leader's) are read linearizably, byte for byte, on every member; the
//! step where only one member is left in the old form is also run with a leader that writes
//! the new form (the old-form leader is restarted until another leads). A member restarted
//! again replays a WAL holding both forms.

use std::time::Duration;

use crate::common::etcdctl::{endpoint_status, started_voters};
use crate::common::{etcdctl, wait_for, Endpoint, K3rs};

const FLAG: &str = "--etcd-compact-encoding";

/// The index in `servers` of the member that leads, as every member agrees.
fn leader(servers: &[K3rs]) -> usize {
    wait_for(
        "one leader seen by every member",
        Duration::from_secs(30),
        || {
            let st: Vec<(u64, u64)> = servers
                .iter()
                .map(|s| endpoint_status(&s.endpoint()))
                .collect::<Option<_>>()?;
            let lead = st[0].1;
            if lead == 0 || st.iter().any(|(_, l)| *l != lead) {
                return None;
            }
            st.iter().position(|(id, _)| *id == lead)
        },
    )
}

/// A value with bytes ≥ 0x80 (two bytes each in the old form), different per write.
fn value(tag: &str) -> String {
    format!("größe-{tag}-€-{}", "ü".repeat(64))
}

/// Writes one key through each member, then reads every key written so far on each.
fn write_and_read_everywhere(servers: &[K3rs], step: &str, written: &mut Vec<(String, String)>) {
    let eps: Vec<Endpoint> = servers.iter().map(K3rs::endpoint).collect();
    for ep in &eps {
        wait_for("three started voters", Duration::from_secs(60), || {
            started_voters(ep, 3)
        });
    }
    for (i, ep) in eps.iter().enumerate() {
        let (k, v) = (format!("/enc/{step}/{i}"), value(&format!("{step}-{i}")));
        etcdctl(ep, &["put", &k, &v], None).expect_ok(&format!("put {k} through s{i}"));
        written.push((k, v));
    }
    for (i, ep) in eps.iter().enumerate() {
        for (k, v) in written.iter() {
            let out = etcdctl(ep, &["get", k, "--print-value-only"], None).expect_ok("get");
            assert_eq!(out.stdout.trim_end(), v, "{k} on s{i} at step {step}");
        }
    }
}

/// Whether the WAL of `server` holds `v` as raw bytes: the compact form (in the old one each
/// byte ≥ 0x80 is preceded by a `0xcc` marker).
fn wal_holds_raw(server: &K3rs, v: &str) -> bool {
    let dir = server.data_dir().join("server/db/etcd/wal");
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .any(|p| {
            let bytes = std::fs::read(&p).unwrap();
            bytes.windows(v.len()).any(|w| w == v.as_bytes())
        })
}

#[test]
fn a_rolling_switch_to_the_compact_encoding_keeps_every_member_reading() {
    let mut servers = K3rs::start_cluster(3, &["--etcd-auto-compaction-retention", "0"], &[]);
    let mut written = Vec::new();
    write_and_read_everywhere(&servers, "old", &mut written);

    for i in 0..3 {
        servers[i].add_arg(FLAG);
        servers[i].restart();
        let step = format!("s{i}-compact");
        write_and_read_everywhere(&servers, &step, &mut written);
        println!("{step}: s{} leads", leader(&servers));
        if i == 1 {
            // s0 and s1 write bin; s2 still the old form. Make a bin writer lead, so s2
            // receives bin entries and forwards old-form proposals to it.
            let mut tries = 0;
            while leader(&servers) == 2 {
                assert!(tries < 5, "s2 keeps leading after {tries} restarts");
                servers[2].restart();
                tries += 1;
            }
            write_and_read_everywhere(&servers, "bin-leader", &mut written);
        }
    }
    // Every WAL now holds old-form entries followed by bin ones: they replay.
    for s in servers.iter_mut() {
        s.restart();
    }
    write_and_read_everywhere(&servers, "replayed", &mut written);

    // Each member wrote its WAL in its own form at the time.
    let (old, first_step, last) = (value("old-0"), value("s0-compact-0"), value("replayed-0"));
    for (i, s) in servers.iter().enumerate() {
        assert!(!wal_holds_raw(s, &old), "s{i} wrote the old form");
        assert!(wal_holds_raw(s, &last), "s{i} wrote the compact form");
    }
    assert!(wal_holds_raw(&servers[0], &first_step));
    assert!(!wal_holds_raw(&servers[2], &first_step));
}
