//! End-to-end: one member of a three-server cluster has its data corrupted on disk, as etcd's
//! own corruption tests do (they rewrite a value in the stopped member's bbolt `key` bucket):
//! the member is stopped (SIGTERM, by its PID), one value is rewritten in its sled store file
//! directly (no Raft, no revision change: bit rot), and it is started again.
//!
//! - With `--etcd-experimental-initial-corrupt-check` it refuses to start (non-zero exit,
//!   etcd's "found data inconsistency with peers"); a healthy member restarted with the flag
//!   passes the same check.
//! - Without it, it serves, and the leader's periodic check
//!   (`--etcd-experimental-corrupt-check-time`) raises CORRUPT for exactly that member:
//!   `etcdctl alarm list` names it, every write is refused with `etcdserver: corrupt cluster`,
//!   reads go on (the corrupted member reads its bad value, the others the good one).
//! - Removing the member and `etcdctl alarm disarm` make writes work again.
//! - When the corrupted member is the *leader*, its peers agree against it and it raises
//!   CORRUPT for itself (etcd's quorum rule, `etcd-api/src/corrupt/quorum.rs`); while only
//!   one peer answers, no hash holds a quorum and CORRUPT is raised for member 0.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use crate::common::etcdctl::{endpoint_status, started_voters};
use crate::common::{etcdctl, wait_for, Endpoint, K3rs};

/// The key whose value is corrupted, its value, and what the corruption writes instead.
const VICTIM_KEY: &str = "/registry/configmaps/default/victim";
const GOOD: &str = "good-value";
const BAD: &str = "rotten-val";

const INITIAL_CHECK: &str = "--etcd-experimental-initial-corrupt-check";

const SERVER_ARGS: &[&str] = &[
    "--etcd-auto-compaction-retention",
    "0",
    "--etcd-experimental-corrupt-check-time",
    "1s",
    INITIAL_CHECK,
];

/// Rewrites the value of the newest record of `key` in the sled store of a stopped member's
/// data dir, bypassing Raft and the store's code: the layout is `storage/src/revision.rs`'s
/// (`k` + main + sub revision keys) and `storage/src/record.rs`'s (29-byte header, key,
/// value). Returns the revision of the record changed.
fn rot_value(data_dir: &Path, key: &[u8], value: &[u8]) -> i64 {
    const HEADER: usize = 1 + 8 + 8 + 8 + 4;
    let sm = data_dir.join("server/db/etcd/sm");
    let gen = std::fs::read_to_string(sm.join("CURRENT")).map_or(0, |s| s.trim().parse().unwrap());
    let db = sled::open(sm.join(format!("db-{gen}"))).expect("open the member's sled store");
    let mut newest = None;
    for entry in db.scan_prefix(b"k") {
        let (k, v) = entry.unwrap();
        let key_len = u32::from_be_bytes(v[25..29].try_into().unwrap()) as usize;
        if v[0] == 0 && &v[HEADER..HEADER + key_len] == key {
            newest = Some((k, v, key_len));
        }
    }
    let (k, v, key_len) = newest.expect("the key's record in the member's store");
    let mut rotten = v[..HEADER + key_len].to_vec();
    rotten.extend_from_slice(value);
    db.insert(&k, rotten).unwrap();
    db.flush().unwrap();
    i64::from_be_bytes(k[1..9].try_into().unwrap())
}

fn get(ep: &Endpoint, key: &str) -> String {
    etcdctl(ep, &["get", key, "--print-value-only"], None)
        .expect_ok("get")
        .stdout
        .trim()
        .to_string()
}

#[test]
fn a_member_with_corrupted_data_is_refused_at_startup_and_raises_corrupt() {
    let env = [(
        "K3RS_LOG",
        OsStr::new("info,openraft=warn,k3rs_etcd_api::corrupt=debug"),
    )];
    let mut servers = K3rs::start_cluster(3, SERVER_ARGS, &env);
    let eps: Vec<Endpoint> = servers.iter().map(K3rs::endpoint).collect();
    etcdctl(&eps[0], &["put", VICTIM_KEY, GOOD], None).expect_ok("put the victim key");
    for i in 0..5 {
        etcdctl(&eps[0], &["put", &format!("/other/{i}"), "v"], None).expect_ok("put");
    }
    for ep in &eps {
        assert_eq!(get(ep, VICTIM_KEY), GOOD);
    }

    // The victim: a follower (a corrupted leader is the next test's).
    let ids: Vec<(u64, u64)> = eps
        .iter()
        .map(|ep| {
            wait_for("endpoint status", Duration::from_secs(30), || {
                endpoint_status(ep)
            })
        })
        .collect();
    let leader = ids[0].1;
    let v = ids.iter().position(|(id, _)| *id != leader).unwrap();
    let victim_id = ids[v].0;
    let healthy: Vec<usize> = (0..3).filter(|i| *i != v).collect();

    // A healthy restart passes the startup check.
    let before = servers[v].log().len();
    servers[v].restart();
    assert!(
        servers[v].log()[before..].contains("initial corruption checking passed; no corruption"),
        "{}",
        &servers[v].log()[before..]
    );
    wait_for("three started voters", Duration::from_secs(30), || {
        started_voters(&eps[healthy[0]], 3)
    });
    assert_eq!(get(&eps[v], VICTIM_KEY), GOOD);

    // Stop it by its PID, rot one value in its store file.
    let pid = servers[v].pid().unwrap();
    let status = servers[v].terminate(Duration::from_secs(30));
    assert!(
        status.is_some(),
        "k3rs server {pid} did not stop on SIGTERM"
    );
    let rev = rot_value(
        &servers[v].data_dir(),
        VICTIM_KEY.as_bytes(),
        BAD.as_bytes(),
    );
    println!("rewrote {VICTIM_KEY}@{rev} of member {victim_id:x} (pid {pid} stopped)");

    // With the startup check: refused, nothing served.
    let before = servers[v].log().len();
    let status = servers[v].run_once_with(&[], Duration::from_secs(90));
    let log = servers[v].log()[before..].to_string();
    assert!(
        status.is_some_and(|s| !s.success()),
        "the corrupted member started anyway ({status:?}):\n{log}"
    );
    let refusal = format!("{victim_id:x} found data inconsistency with peers");
    assert!(log.contains(&refusal), "no {refusal:?} in:\n{log}");
    assert!(
        log.contains("found different hash values from remote peer"),
        "{log}"
    );
    assert!(
        !log.contains("etcd API listening"),
        "served clients:\n{log}"
    );
    let alarms = etcdctl(&eps[healthy[0]], &["alarm", "list"], None).expect_ok("alarm list");
    assert_eq!(alarms.stdout, "", "no alarm while the member is down");

    // Without it: it serves, and the leader's periodic check raises CORRUPT for it.
    servers[v].remove_arg(INITIAL_CHECK);
    servers[v].restart();
    let expected = format!("memberID:{victim_id} alarm:CORRUPT");
    let alarms = wait_for("the CORRUPT alarm", Duration::from_secs(60), || {
        let out = etcdctl(&eps[healthy[0]], &["alarm", "list"], None);
        out.stdout.contains("alarm:CORRUPT").then_some(out.stdout)
    });
    assert_eq!(alarms.trim(), expected, "{alarms}");
    for ep in &eps {
        let out = etcdctl(ep, &["put", "refused", "x"], None);
        assert!(!out.success(), "a write went through: {out:?}");
        assert!(
            out.stderr.contains("etcdserver: corrupt cluster"),
            "{out:?}"
        );
        let out = etcdctl(ep, &["del", "/other/0"], None);
        assert!(
            out.stderr.contains("etcdserver: corrupt cluster"),
            "{out:?}"
        );
    }
    // Reads go on; each member reads its own data.
    for i in &healthy {
        assert_eq!(get(&eps[*i], VICTIM_KEY), GOOD);
        assert_eq!(get(&eps[*i], "/other/0"), "v");
    }
    assert_eq!(get(&eps[v], VICTIM_KEY), BAD);
    // The leader's log names the member (every alarm it raised, none for another member).
    let ansi = regex::Regex::new("\x1b\\[[0-9;]*m").unwrap();
    let raised: Vec<String> = servers
        .iter()
        .flat_map(|s| {
            ansi.replace_all(&s.log(), "")
                .lines()
                .filter(|l| l.contains("raising the CORRUPT alarm"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!raised.is_empty(), "no leader logged the mismatch");
    let named = format!("member={victim_id:x} ");
    assert!(raised.iter().all(|l| l.contains(&named)), "{raised:#?}");

    // The fix: remove the bad member, disarm, write again.
    let out = etcdctl(
        &eps[healthy[0]],
        &["member", "remove", &format!("{victim_id:x}")],
        None,
    );
    out.expect_ok("member remove");
    let status = servers[v].wait_exit(Duration::from_secs(30));
    assert!(status.is_some(), "the removed member kept running");
    etcdctl(&eps[healthy[0]], &["alarm", "disarm"], None).expect_ok("alarm disarm");
    let alarms = etcdctl(&eps[healthy[1]], &["alarm", "list"], None).expect_ok("alarm list");
    assert_eq!(alarms.stdout, "", "alarms left after disarm");
    for i in &healthy {
        etcdctl(&eps[*i], &["put", "after-fix", "ok"], None).expect_ok("put after the fix");
        assert_eq!(get(&eps[*i], VICTIM_KEY), GOOD);
    }
    // The periodic check keeps running on the two left and agrees.
    std::thread::sleep(Duration::from_secs(3));
    let alarms = etcdctl(&eps[healthy[0]], &["alarm", "list"], None).expect_ok("alarm list");
    assert_eq!(alarms.stdout, "", "the healthy members raised an alarm");
}

/// Which member leads, as `endpoint status` on `ep` says (`None`: no answer or no leader).
fn leader_seen_by(ep: &Endpoint) -> Option<u64> {
    endpoint_status(ep)
        .map(|(_, leader)| leader)
        .filter(|l| *l != 0)
}

#[test]
fn a_corrupted_leader_is_named_by_the_quorum_of_its_peers() {
    let env = [(
        "K3RS_LOG",
        OsStr::new("info,openraft=warn,k3rs_etcd_api::corrupt=debug"),
    )];
    let args: Vec<&str> = SERVER_ARGS
        .iter()
        .copied()
        .filter(|a| *a != INITIAL_CHECK)
        .collect();
    let mut servers = K3rs::start_cluster(3, &args, &env);
    let eps: Vec<Endpoint> = servers.iter().map(K3rs::endpoint).collect();
    etcdctl(&eps[0], &["put", VICTIM_KEY, GOOD], None).expect_ok("put the victim key");
    for i in 0..5 {
        etcdctl(&eps[0], &["put", &format!("/other/{i}"), "v"], None).expect_ok("put");
    }
    let ids: Vec<u64> = eps
        .iter()
        .map(|ep| {
            wait_for("endpoint status", Duration::from_secs(30), || {
                endpoint_status(ep).map(|(id, _)| id)
            })
        })
        .collect();
    for ep in &eps {
        assert_eq!(get(ep, VICTIM_KEY), GOOD);
        assert_eq!(get(ep, "/other/4"), "v");
    }

    // Stop every member (same log on all), rot the victim's value, then start the victim
    // first and one peer after it: the victim has campaigned for a while, so the peer votes
    // for it. Bounded retries if the peer wins anyway.
    let v = 0;
    for s in servers.iter_mut().rev() {
        assert!(
            s.terminate(Duration::from_secs(30)).is_some(),
            "a server did not stop on SIGTERM"
        );
    }
    let rev = rot_value(
        &servers[v].data_dir(),
        VICTIM_KEY.as_bytes(),
        BAD.as_bytes(),
    );
    println!("rewrote {VICTIM_KEY}@{rev} of member {:x}", ids[v]);
    let mut led = false;
    for attempt in 0..4 {
        servers[v].relaunch();
        std::thread::sleep(Duration::from_secs(3));
        servers[1].relaunch();
        let leader = wait_for("a leader of two", Duration::from_secs(60), || {
            leader_seen_by(&eps[1])
        });
        println!("attempt {attempt}: leader {leader:x}");
        if leader == ids[v] {
            led = true;
            break;
        }
        servers[1].kill();
        servers[v].kill();
    }
    assert!(led, "the corrupted member never became the leader");

    // With the third member down, the two that answer disagree and neither holds a quorum of
    // three: the check cannot tell who is wrong and raises CORRUPT for member 0 (the whole
    // cluster), as etcd's `checkPeerHashes` (etcdctl prints no memberID for 0).
    let alarms = wait_for(
        "the cluster-wide CORRUPT alarm",
        Duration::from_secs(60),
        || {
            let out = etcdctl(&eps[1], &["alarm", "list"], None);
            out.stdout.contains("alarm:CORRUPT").then_some(out.stdout)
        },
    );
    assert_eq!(alarms.trim(), "alarm:CORRUPT", "{alarms}");

    // With all three: both peers agree against the leader, so it names itself (etcd's
    // periodic rule would have named a healthy peer). Disarm the cluster-wide alarm a check
    // made before the third member was back, until only the leader's is raised.
    servers[2].restart();
    wait_for("three started voters", Duration::from_secs(30), || {
        started_voters(&eps[1], 3)
    });
    assert_eq!(get(&eps[v], VICTIM_KEY), BAD);
    assert_eq!(get(&eps[2], VICTIM_KEY), GOOD);
    let expected = format!("memberID:{} alarm:CORRUPT", ids[v]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = etcdctl(&eps[2], &["alarm", "list"], None);
        let listed = out.stdout.trim().to_string();
        if listed == expected {
            break;
        }
        if std::time::Instant::now() > deadline {
            let checks: Vec<String> = servers[v]
                .log()
                .lines()
                .filter(|l| l.contains("corrupt"))
                .map(str::to_string)
                .collect();
            let tail = &checks[checks.len().saturating_sub(30)..];
            panic!("alarms {listed:?}, not {expected:?}; the leader's checks:\n{tail:#?}");
        }
        if listed.lines().any(|l| l.trim() == "alarm:CORRUPT") {
            etcdctl(&eps[2], &["alarm", "disarm"], None).expect_ok("alarm disarm");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(leader_seen_by(&eps[2]), Some(ids[v]), "the leader changed");
    let out = etcdctl(&eps[1], &["put", "refused", "x"], None);
    assert!(
        out.stderr.contains("etcdserver: corrupt cluster"),
        "{out:?}"
    );
    let ansi = regex::Regex::new("\x1b\\[[0-9;]*m").unwrap();
    let log = ansi.replace_all(&servers[v].log(), "").to_string();
    let raised: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("raising the CORRUPT alarm"))
        .collect();
    let named = format!("member={:x} ", ids[v]);
    assert!(
        raised.iter().any(|l| l.contains(&named))
            && raised
                .iter()
                .all(|l| l.contains(&named) || l.contains("member=0 ")),
        "{raised:#?}"
    );
    // A few more checks raise nothing for the healthy members.
    std::thread::sleep(Duration::from_secs(3));
    let alarms = etcdctl(&eps[2], &["alarm", "list"], None).expect_ok("alarm list");
    assert_eq!(alarms.stdout.trim(), expected);
}
