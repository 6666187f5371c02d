//! Acceptance: the same etcdctl script against `k3rs server` and a real etcd 3.4 gives the same
//! output (lease/member/cluster IDs, raft term/index, sizes, versions and timings aside;
//! revisions, keys, values, errors and exit codes exactly), and k3rs refuses clients without a
//! certificate from its CA.
//!
//! On a mismatch the test prints every differing step with a line diff (`-` etcd, `+` k3rs).

mod diff;
mod normalize;
mod runner;

use std::path::Path;
use std::process::Command;

use crate::common;
use crate::common::{etcdctl, Endpoint, Etcd, K3rs, TlsFiles};
use runner::{
    ctl, ctl_args, ctl_capture, ctl_stdin, exit_only, fill_until_refused, poll_until, run_script,
    sleep_ms, start, stop, Record, Step,
};

/// The script. Both stores start empty at revision 1, so every revision must match.
fn script() -> Vec<Step> {
    let mut s = Vec::new();

    // --- put: plain, --prev-kv, --ignore-value, errors
    s.extend([
        ctl("put foo bar"),
        ctl("put foo bar2 --prev-kv"),
        ctl("put foo bar3 --prev-kv -w json"),
        ctl("put foo --ignore-value"),
        ctl("get foo -w fields"),
        ctl("put missing --ignore-value"),
        ctl("put foo v --ignore-value"),
        ctl_args(&["put", "", "v"]),
        ctl_args(&["put", "space key", "a value with spaces"]),
        ctl_args(&["get", "space key", "--hex"]),
    ]);

    // --- get: sort targets/orders, ranges, limits, revisions, output shapes
    s.extend([
        ctl("put s/c x"),
        ctl("put s/a z"),
        ctl("put s/b y"),
        ctl("put s/c xx"),
        ctl_capture("put s/c xxx -w json", "S_MID"),
        ctl("put s/a zz"),
    ]);
    for target in ["KEY", "VERSION", "CREATE", "MODIFY", "VALUE"] {
        for order in ["ASCEND", "DESCEND"] {
            s.push(ctl(&format!(
                "get s/ --prefix --sort-by={target} --order={order}"
            )));
        }
        s.push(ctl(&format!("get s/ --prefix --sort-by={target}")));
    }
    s.extend([
        ctl("get s/ --prefix --order=DESCEND"),
        ctl("get s/ --prefix --sort-by=MODIFY --order=DESCEND --limit=2 -w json"),
        ctl("get s/ --prefix -w json"),
        ctl("get s/ --prefix --limit=2 -w json"),
        ctl("get s/ --prefix --limit=3 -w json"),
        ctl("get s/ --prefix --count-only -w json"),
        ctl("get s/ --prefix --count-only --limit=1 -w json"),
        ctl("get s/ --prefix --keys-only"),
        ctl("get s/ --prefix --keys-only -w json"),
        ctl("get s/ --prefix --print-value-only"),
        ctl("get s/ --prefix --print-value-only --keys-only"),
        ctl("get s/a s/c"),
        ctl("get s/a s/c -w json"),
        ctl("get s/b --from-key"),
        ctl("get s/b --from-key --keys-only --limit=2"),
        ctl("get s/ --prefix --rev=${S_MID} -w json"),
        ctl("get s/a --rev=${S_MID}"),
        ctl("get s/a --rev=2"),
        ctl("get s/ --prefix --consistency=s --keys-only"),
        ctl("get s/ --prefix -w fields"),
        ctl("get s/ --prefix --hex"),
        ctl("get nosuchkey"),
        ctl("get nosuchkey -w json"),
        ctl("get s/ --prefix --limit=1 --rev=100000"),
        ctl_args(&["get", "", "--prefix", "--keys-only"]),
        ctl_args(&["get", "", "--from-key", "--keys-only"]),
        ctl("get s/c s/a"),
    ]);

    // --- del: single, missing, range, --prefix --prev-kv, --from-key
    s.extend([
        ctl("put d/1 one"),
        ctl("put d/2 two"),
        ctl("put d/3 three"),
        ctl("put d/4 four"),
        ctl("put e/1 uno"),
        ctl("del d/1"),
        ctl("del d/1"),
        ctl("del d/2 d/4 --prev-kv"),
        ctl("del d/ --prefix --prev-kv"),
        ctl("del e/ --prefix --prev-kv -w json"),
        ctl("get d/ --prefix -w json"),
        ctl("put zz/1 a"),
        ctl("put zz/2 b"),
        ctl("del zz/ --from-key --prev-kv"),
        ctl("get zz/ --from-key -w json"),
    ]);

    // --- txn: compares on value/version/create/mod, both branches, interactive, errors
    let txn_ok =
        "val(\"t/a\") = \"1\"\nver(\"t/a\") = \"1\"\n\nput t/a 2\nget t/a\n\nput t/fail x\n\n";
    let txn_fail = "mod(\"t/a\") = \"1\"\n\nput t/never x\n\nput t/b fb\nget t/ --prefix\n\n";
    let txn_create = "create(\"t/a\") > \"0\"\nmod(\"t/zzz\") = \"0\"\nver(\"t/b\") < \"5\"\n\n\
                      del t/b\nput t/c c\n\nget t/a\n\n";
    let txn_create_fail = "c(\"t/a\") < \"2\"\n\nput t/x x\n\nget t/a\nget t/c\n\n";
    s.extend([
        ctl("put t/a 1"),
        ctl_stdin("txn", txn_ok),
        ctl_stdin("txn -w json", txn_fail),
        ctl_stdin("txn", txn_create),
        ctl_stdin("txn -w json", txn_create_fail),
        ctl_stdin(
            "txn -i",
            "val(\"t/a\") != \"2\"\n\nput t/i yes\n\nput t/i no\n\n",
        ),
        ctl_stdin(
            "txn",
            "m(\"t/a\") > \"2\"\n\nget t/ --prefix --keys-only\n\n\n",
        ),
        ctl_stdin("txn", "\nput t/empty 1\n\n\n"),
        ctl_stdin("txn", "\nput t/dup 1\nput t/dup 2\n\n\n"),
        ctl_stdin("txn", "\nput t/dup 1\ndel t/dup\n\n\n"),
        ctl_stdin("txn", "\ndel t/ --prefix\nput t/a 9\n\n\n"),
        ctl("get t/ --prefix -w json"),
        // etcd's HashKV over the same history (no lease yet: etcd picks lease IDs at random).
        ctl("endpoint hashkv"),
        ctl("endpoint hashkv -w json"),
        ctl("endpoint hashkv --rev=${S_MID} -w json"),
        ctl("endpoint hashkv --rev=100000"),
        // Everything so far must survive a crash (SIGKILL) and restart.
        Step::Restart,
        ctl("get t/ --prefix -w json"),
        ctl("get s/ --prefix -w json"),
        ctl("endpoint hashkv -w json"),
    ]);

    // --- watch: history with --rev --prefix --prev-kv, live events, a future revision
    s.extend([
        ctl_capture("put w/a 1 -w json", "W0"),
        ctl("put w/b 1"),
        ctl("put w/a 2"),
        ctl("del w/b"),
        ctl_stdin("txn", "\nput w/c 1\nput w/d 1\ndel w/a\n\n\n"),
        start("hist", "watch w/ --prefix --rev=${W0} --prev-kv"),
        start(
            "hist_fields",
            "watch w/ --prefix --rev=${W0} --prev-kv -w fields",
        ),
        start("hist_key", "watch w/a --rev=1"),
        start("live", "watch l/ --prefix --prev-kv -w fields"),
        ctl_capture("get nosuchkey -w json", "NOW"),
        // Starts at a revision that does not exist yet: only events from it on.
        start("future", "watch l/ --prefix --rev=${NOW+3}"),
        // Time for the background watches to be established on a busy machine.
        sleep_ms(3000),
        ctl("put l/x 1"),
        ctl("put l/x 2"),
        ctl("del l/x"),
        ctl_stdin("txn", "\nput l/y 1\nput l/z 1\n\n\n"),
        ctl("put other 1"),
        sleep_ms(1000),
        stop("hist"),
        stop("hist_fields"),
        stop("hist_key"),
        stop("live"),
        stop("future"),
    ]);

    // --- leases: grant, attach, keep-alive, time-to-live, list, revoke, errors, expiry
    s.extend([
        // Revocation and expiry delete the attached keys: watch for those DELETE events.
        ctl_capture("get nosuchkey -w json", "L0"),
        ctl("lease grant 100"),
        ctl("lease grant 300"),
        ctl("put lk/a 1 --lease=${LEASE1}"),
        ctl("put lk/b 2 --lease=${LEASE1} --prev-kv"),
        ctl("put lk/c 3 --lease=${LEASE2}"),
        // Leases and their keys survive a crash and restart.
        Step::Restart,
        ctl("lease list"),
        start(
            "lease_keys",
            "watch lk/ --prefix --rev=${L0+1} --prev-kv -w fields",
        ),
        start("expiring_keys", "watch exp/ --prefix --rev=${L0+1}"),
        ctl("get lk/ --prefix -w json"),
        ctl("get lk/a -w fields"),
        ctl("lease timetolive ${LEASE1}"),
        ctl("lease timetolive ${LEASE1} --keys"),
        ctl("lease timetolive 1234abcd"),
        ctl("lease keep-alive --once ${LEASE1}"),
        ctl("lease keep-alive --once 1234abcd"),
        ctl("lease list"),
        ctl("put lk/a 4 --ignore-lease"),
        ctl("put lk/a --ignore-value --ignore-lease"),
        ctl("get lk/a -w json"),
        ctl("put lk/c 5"),
        ctl("get lk/c -w json"),
        ctl("put lk/d 1 --lease=1234abcd"),
        ctl("put lk/d 1 --ignore-lease"),
        ctl("lease revoke ${LEASE1}"),
        ctl("get lk/ --prefix -w json"),
        ctl("lease timetolive ${LEASE1}"),
        ctl("lease revoke ${LEASE1}"),
        ctl("lease keep-alive --once ${LEASE1}"),
        ctl("lease revoke ${LEASE2}"),
        ctl("lease grant 2"),
        ctl("put exp/a 1 --lease=${LEASE3}"),
        ctl("put exp/b 1 --lease=${LEASE3}"),
        ctl("get exp/ --prefix --keys-only"),
        poll_until("get exp/ --prefix --keys-only", "", 20),
        ctl("get exp/ --prefix -w json"),
        ctl("lease timetolive ${LEASE3}"),
        ctl("lease list"),
        stop("lease_keys"),
        stop("expiring_keys"),
    ]);

    // --- compaction: reads and watches at compacted revisions, errors
    s.extend([
        ctl_capture("put c/k v1 -w json", "C1"),
        ctl("put c/k v2"),
        ctl_capture("put c/k v3 -w json", "C3"),
        ctl("get c/k --rev=${C1}"),
        ctl("compact ${C3}"),
        // The records of leased keys are compacted away (none is live): hashes compare again.
        ctl("endpoint hashkv -w json"),
        ctl("endpoint hashkv --rev=${C3}"),
        ctl("endpoint hashkv --rev=${C1}"),
        ctl("get c/k --rev=${C1}"),
        ctl("get c/k --rev=${C3} -w json"),
        ctl("get s/ --prefix --rev=${S_MID}"),
        ctl("compact ${C1}"),
        ctl("compact 100000"),
        ctl("get c/k --rev=100000"),
        ctl("watch c/k --rev=${C1}"),
        ctl("watch c/ --prefix --rev=2"),
        start("at_compact", "watch c/k --rev=${C3}"),
        sleep_ms(1000),
        stop("at_compact"),
        ctl_capture("put c/k v4 -w json", "C4"),
        ctl("compact ${C4} --physical"),
        ctl("get c/k --rev=${C3}"),
        ctl("get c/ --prefix -w json"),
        // The compaction point survives a crash and restart.
        Step::Restart,
        ctl("get c/k --rev=${C3}"),
        ctl("get c/k --rev=${C4} -w json"),
        ctl("compact ${C3}"),
        ctl("endpoint hashkv -w json"),
        ctl("endpoint hashkv --rev=${C4} -w json"),
    ]);

    // --- cluster and maintenance
    s.extend([
        ctl("endpoint status"),
        ctl("endpoint status -w json"),
        ctl("endpoint status -w table"),
        ctl("endpoint health"),
        ctl("endpoint health -w json"),
        ctl("endpoint health -w table"),
        ctl("member list"),
        ctl("member list -w json"),
        ctl("member list -w table"),
        ctl("alarm list"),
        ctl("alarm disarm"),
        ctl("snapshot save ${SNAP}"),
        ctl("defrag"),
        ctl("endpoint hashkv"),
        ctl_args(&["get", "", "--from-key", "--keys-only"]),
        ctl("get s/ --prefix -w json"),
    ]);
    s
}

/// The backend quota both stores get in [`quota_script`]: 8 MiB.
const SMALL_QUOTA: &str = "8388608";

/// Filling a small quota: NOSPACE raised, which writes it refuses and which it lets through,
/// across a restart, then compact + defrag + disarm and writing again.
fn quota_script() -> Vec<Step> {
    vec![
        ctl("alarm list"),
        ctl("put before 1"),
        fill_until_refused("fill/", 400_000, 200),
        ctl("alarm list"),
        ctl("alarm list -w json"),
        // (The JSON forms show the revision, which depends on how many puts the fill took.)
        ctl("endpoint status"),
        ctl("put small x"),
        ctl_stdin("txn", "\nput small y\n\n\n"),
        ctl("lease grant 10"),
        ctl("get before"),
        ctl("get fill/0 --keys-only"),
        // Alarms are kept across a crash and restart.
        Step::Restart,
        ctl("alarm list"),
        ctl("put small x"),
        // Reclaiming space: deletes and compaction go on; their counts and revisions differ
        // (the stores took different numbers of puts to fill).
        exit_only("del fill/ --prefix", None),
        exit_only("get before -w json", Some("FREED")),
        exit_only("compact ${FREED} --physical", None),
        ctl("defrag"),
        // Still raised until disarmed.
        ctl("alarm list"),
        ctl("put small x"),
        ctl("alarm disarm"),
        ctl("alarm list"),
        ctl("put small x"),
        ctl("get small --print-value-only"),
        ctl("alarm disarm"),
        ctl("endpoint status"),
    ]
}

/// `Alarm(ACTIVATE, CORRUPT)` for member 42 over gRPC (etcdctl cannot raise alarms).
fn raise_corrupt_for_member_42(ep: &Endpoint) -> String {
    use k3rs_datastore::etcdpb as pb;
    common::client::runtime().block_on(async {
        let mut c = common::client::Clients::connect(ep).await.expect("connect");
        let req = pb::AlarmRequest {
            action: pb::alarm_request::AlarmAction::Activate as i32,
            member_id: 42,
            alarm: pb::AlarmType::Corrupt as i32,
        };
        match c.maintenance.alarm(req).await {
            Ok(r) => {
                let alarms: Vec<(u64, i32)> = r
                    .into_inner()
                    .alarms
                    .iter()
                    .map(|a| (a.member_id, a.alarm))
                    .collect();
                format!("raised {alarms:?}\n")
            }
            Err(s) => format!("error {:?}: {}\n", s.code(), s.message()),
        }
    })
}

/// A CORRUPT alarm raised for some member: what it refuses, across a restart, and disarming.
fn corrupt_script() -> Vec<Step> {
    let raise = Step::Call {
        name: "Alarm(ACTIVATE, member 42, CORRUPT) over gRPC",
        call: raise_corrupt_for_member_42,
    };
    vec![
        ctl("put a 1"),
        raise.clone(),
        raise,
        ctl("alarm list"),
        ctl("endpoint status"),
        ctl("get a -w json"),
        ctl("put a 2"),
        ctl("del a"),
        ctl_stdin("txn", "\nget a\n\n\n"),
        ctl_stdin("txn", "\nput a 3\n\n\n"),
        ctl("compact 2"),
        ctl("lease grant 10"),
        Step::Restart,
        ctl("alarm list"),
        ctl("put a 2"),
        ctl("alarm disarm"),
        ctl("alarm list"),
        ctl("put a 2"),
        ctl("get a -w json"),
        ctl("endpoint hashkv -w json"),
    ]
}

/// A store the script can run against.
trait Target: Send {
    fn endpoint(&self) -> Endpoint;
    fn restart(&mut self);
}

impl Target for Etcd {
    fn endpoint(&self) -> Endpoint {
        Etcd::endpoint(self)
    }
    fn restart(&mut self) {
        Etcd::restart(self)
    }
}

impl Target for K3rs {
    fn endpoint(&self) -> Endpoint {
        K3rs::endpoint(self)
    }
    fn restart(&mut self) {
        K3rs::restart(self)
    }
}

fn run_on(target: &mut dyn Target, steps: &[Step]) -> Vec<Record> {
    let ep = target.endpoint();
    run_script(&ep, steps, &mut || target.restart())
}

fn run_and_compare(reference: (&str, &mut dyn Target), candidate: (&str, &mut dyn Target)) {
    run_script_and_compare(&script(), reference, candidate)
}

fn run_script_and_compare(
    steps: &[Step],
    reference: (&str, &mut dyn Target),
    candidate: (&str, &mut dyn Target),
) {
    let ((ref_name, ref_target), (cand_name, cand_target)) = (reference, candidate);
    // The two runs are independent: run them in parallel to halve the wall time.
    let (refr, cand) = std::thread::scope(|scope| {
        let ref_run = scope.spawn(|| run_on(ref_target, steps));
        let cand = run_on(cand_target, steps);
        (ref_run.join().expect("reference run"), cand)
    });
    if let Ok(dir) = std::env::var("K3RS_COMPAT_TRANSCRIPTS") {
        for (name, t) in [(ref_name, &refr), (cand_name, &cand)] {
            let text: String = t
                .iter()
                .map(|r| format!("$ etcdctl {}\n{}\n", r.command, r.output))
                .collect();
            std::fs::write(Path::new(&dir).join(format!("{name}.txt")), text).unwrap();
        }
    }
    if let Some(report) = diff::compare(ref_name, &refr, cand_name, &cand) {
        panic!("etcdctl transcripts differ ({ref_name} vs {cand_name}):\n{report}");
    }
}

/// The acceptance test: k3rs answers the whole script exactly like etcd 3.4.
#[test]
fn etcdctl_script_matches_etcd_3_4() {
    let mut etcd = Etcd::start();
    let mut k3rs = K3rs::start();
    run_and_compare(("etcd-3.4", &mut etcd), ("k3rs", &mut k3rs));
    k3rs.assert_running();
}

/// Acceptance: NOSPACE from a small backend quota behaves as etcd 3.4's, step by step.
#[test]
fn quota_and_nospace_alarm_match_etcd_3_4() {
    let mut etcd = Etcd::start_with(&["--quota-backend-bytes", SMALL_QUOTA]);
    let mut k3rs = K3rs::start_with(&[
        "--etcd-auto-compaction-retention",
        "0",
        "--etcd-quota-backend-bytes",
        SMALL_QUOTA,
    ]);
    run_script_and_compare(
        &quota_script(),
        ("etcd-3.4", &mut etcd),
        ("k3rs", &mut k3rs),
    );
    k3rs.assert_running();
}

/// Acceptance: a CORRUPT alarm raised through the API behaves as etcd 3.4's, step by step.
#[test]
fn corrupt_alarm_matches_etcd_3_4() {
    let mut etcd = Etcd::start();
    let mut k3rs = K3rs::start();
    run_script_and_compare(
        &corrupt_script(),
        ("etcd-3.4", &mut etcd),
        ("k3rs", &mut k3rs),
    );
    k3rs.assert_running();
}

/// The harness itself: two independent etcd 3.4 servers must give identical normalized
/// transcripts, so every difference the acceptance test reports is a real one.
#[test]
fn harness_self_check_etcd_vs_etcd() {
    let mut a = Etcd::start();
    let mut b = Etcd::start();
    run_and_compare(("etcd-a", &mut a), ("etcd-b", &mut b));
}

/// A key/cert pair from a CA that is not the cluster's, made with openssl.
fn foreign_client_cert(dir: &Path) -> TlsFiles {
    let openssl = common::require_program("openssl", "openssl");
    let run = |args: &[&str]| {
        let out = Command::new(&openssl)
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let ca = [
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=foreign-ca",
    ];
    run(&[&["req", "-x509"][..], &ec, &ca].concat());
    let csr = [
        "-keyout",
        "client.key",
        "-out",
        "client.csr",
        "-subj",
        "/CN=root",
    ];
    run(&[&["req"][..], &ec, &csr].concat());
    std::fs::write(dir.join("ext.cnf"), "extendedKeyUsage=clientAuth\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "client.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "client.crt",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
    TlsFiles {
        ca: dir.join("ca.crt"),
        cert: Some(dir.join("client.crt")),
        key: Some(dir.join("client.key")),
    }
}

/// Only clients with a certificate signed by the cluster's CA get in.
#[test]
fn clients_without_a_cluster_certificate_are_refused() {
    let mut k3rs = K3rs::start();
    let good = k3rs.endpoint();
    etcdctl(&good, &["put", "secret", "s3cr3t"], None).expect_ok("put with the cluster cert");
    let server_ca = good.tls.as_ref().unwrap().ca.clone();
    let scratch = tempfile::tempdir().unwrap();
    let foreign = foreign_client_cert(scratch.path());

    let cases: Vec<(&str, Endpoint)> = vec![
        (
            "no client certificate",
            good.with_tls(Some(TlsFiles {
                ca: server_ca.clone(),
                cert: None,
                key: None,
            })),
        ),
        (
            "client certificate from another CA",
            good.with_tls(Some(TlsFiles {
                ca: server_ca.clone(),
                ..foreign.clone()
            })),
        ),
        (
            "self-signed client certificate (the foreign CA itself)",
            good.with_tls(Some(TlsFiles {
                ca: server_ca,
                cert: Some(foreign.ca.clone()),
                key: Some(scratch.path().join("ca.key")),
            })),
        ),
        (
            "plaintext",
            Endpoint {
                url: format!("http://127.0.0.1:{}", k3rs.port()),
                tls: None,
            },
        ),
    ];
    for (what, ep) in cases {
        let out = etcdctl(
            &ep,
            &["get", "secret", "--dial-timeout=2s", "--command-timeout=3s"],
            None,
        );
        assert!(
            !out.success(),
            "{what}: etcdctl succeeded but must be refused: {out:?}"
        );
        assert!(
            !out.stdout.contains("s3cr3t"),
            "{what}: the value leaked: {out:?}"
        );
        k3rs.assert_running();
    }
    // The server still serves properly authenticated clients.
    let out = etcdctl(&good, &["get", "secret", "--print-value-only"], None).expect_ok("get");
    assert_eq!(out.stdout.trim(), "s3cr3t");
}
