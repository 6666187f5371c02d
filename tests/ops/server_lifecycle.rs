//! `k3rs server` as a process: SIGTERM/SIGINT shut it down cleanly (exit 0) with its data kept,
//! it reuses its PKI on restart, and `--etcd-auto-compaction-retention` compacts old revisions.

use std::time::{Duration, Instant};

use crate::common;
use crate::common::{etcdctl, K3rs};

#[test]
fn sigterm_and_sigint_shut_down_cleanly_and_keep_data() {
    let mut k3rs = K3rs::start();
    let ca = std::fs::read(k3rs.etcd_tls_dir().join("server-ca.crt")).unwrap();
    for (round, signal) in ["TERM", "INT"].into_iter().enumerate() {
        let ep = k3rs.endpoint();
        let key = format!("kept-{round}");
        etcdctl(&ep, &["put", &key, "v"], None).expect_ok("put");
        let exited = k3rs.stop_with(signal, Duration::from_secs(20));
        let exited = exited.unwrap_or_else(|| panic!("no exit within 20 s of SIG{signal}"));
        assert!(
            exited.success(),
            "exit after SIG{signal}: {exited}; log tail:\n{}",
            common::log_tail(&k3rs.log_path(), 20)
        );
        k3rs.restart();
        let out = etcdctl(
            &k3rs.endpoint(),
            &["get", "kept-", "--prefix", "--keys-only"],
            None,
        );
        let out = out.expect_ok("get after restart");
        let keys: Vec<&str> = out.stdout.split_whitespace().collect();
        assert_eq!(keys.len(), round + 1, "keys after restart: {keys:?}");
    }
    let ca_after = std::fs::read(k3rs.etcd_tls_dir().join("server-ca.crt")).unwrap();
    assert_eq!(ca, ca_after, "the etcd CA must be reused across restarts");
}

#[test]
fn automatic_compaction_follows_the_retention_flag() {
    let k3rs = K3rs::start_with(&["--etcd-auto-compaction-retention", "1s"]);
    let ep = k3rs.endpoint();
    for i in 0..5 {
        etcdctl(&ep, &["put", "churn", &i.to_string()], None).expect_ok("put");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Keep writing so there is always something newer than the retention window.
        etcdctl(&ep, &["put", "churn", "x"], None).expect_ok("put");
        let out = etcdctl(&ep, &["get", "churn", "--rev=2"], None);
        if out
            .stderr
            .contains("etcdserver: mvcc: required revision has been compacted")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "revision 2 still readable 30 s after writes with a 1 s retention: {out:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let out = etcdctl(&ep, &["get", "churn", "--print-value-only"], None).expect_ok("get");
    assert_eq!(
        out.stdout.trim(),
        "x",
        "compaction keeps the latest version"
    );
}
