//! `--etcd-experimental-corrupt-check-time` on a real `k3rs server`: the flag is parsed, the
//! leader's periodic `HashKV` check runs on a healthy member without raising an alarm, and a
//! bad value is refused at startup. (The mismatch decision itself is unit-tested in
//! `etcd-api/src/corrupt.rs`.)

use std::ffi::OsStr;
use std::time::{Duration, Instant};

use crate::common::{etcdctl, K3rs};

#[test]
fn corrupt_check_runs_periodically_on_a_healthy_member_without_alarms() {
    let mut k3rs = K3rs::start_with_env(
        &[
            "--etcd-auto-compaction-retention",
            "0",
            "--etcd-experimental-corrupt-check-time",
            "300ms",
        ],
        &[(
            "K3RS_LOG",
            OsStr::new("info,openraft=warn,k3rs_etcd_api::corrupt=debug"),
        )],
    );
    let ep = k3rs.endpoint();
    assert!(
        k3rs.log().contains("corruption check enabled"),
        "no sign of the check in the log:\n{}",
        k3rs.log()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut i = 0;
    loop {
        etcdctl(&ep, &["put", &format!("k{i}"), "v"], None).expect_ok("put during checks");
        i += 1;
        let checks = k3rs
            .log()
            .matches("corruption check: members agree")
            .count();
        if checks >= 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{checks} checks in 30 s; log:\n{}",
            k3rs.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let alarms = etcdctl(&ep, &["alarm", "list"], None).expect_ok("alarm list");
    assert_eq!(alarms.stdout, "", "a healthy member raised an alarm");
    etcdctl(&ep, &["put", "after", "checks"], None).expect_ok("writes still work");
    k3rs.assert_running();
}

#[test]
fn a_bad_corrupt_check_interval_is_refused_at_startup() {
    let (status, log, _dir) = K3rs::run_to_exit(
        &["--etcd-experimental-corrupt-check-time", "often"],
        Duration::from_secs(30),
    );
    let status = status.expect("k3rs server kept running with a bad interval");
    assert!(!status.success(), "exit status {status}");
    assert!(
        log.contains("invalid duration \"often\""),
        "no reason given:\n{log}"
    );
}
