//! End-to-end: three real `k3rs server` processes on 127.0.0.1 form one cluster the etcd way:
//! `etcdctl member add <peer URL>` on the first, then the new server starts with
//! `--etcd-join-peer <first's peer URL>` (interim, until servers join by token; the test copies
//! the first server's etcd CAs, which the token join will transfer). `etcdctl member list`
//! then shows three started voters on every member, writes on one are read (linearizably)
//! on another, and after the leader is killed (SIGKILL) the others elect a new one. Then the
//! majority is lost for good and the last server is rebuilt with `--cluster-reset`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::etcdctl::etcdctl_with_timeout;
use common::etcdctl::{members, started_voters};
use common::process::ChildGuard;
use common::{etcdctl, free_port, wait_for, Endpoint, K3rs, TlsFiles};

/// A joined server: its process, data dir and ports.
struct Joiner {
    proc: Option<ChildGuard>,
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
}

impl Joiner {
    fn tls_dir(&self) -> PathBuf {
        self.dir.path().join("server/tls/etcd")
    }

    fn endpoint(&self) -> Endpoint {
        endpoint(&self.tls_dir(), self.client_port)
    }
}

fn endpoint(tls: &Path, port: u16) -> Endpoint {
    Endpoint {
        url: format!("https://127.0.0.1:{port}"),
        tls: Some(TlsFiles {
            ca: tls.join("server-ca.crt"),
            cert: Some(tls.join("client.crt")),
            key: Some(tls.join("client.key")),
        }),
    }
}

fn peer_url(port: u16) -> String {
    format!("https://127.0.0.1:{port}")
}

/// `k3rs server` on `dir` with the given ports and extra flags.
fn server_command(dir: &Path, client_port: u16, peer_port: u16, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
    cmd.arg("server")
        .arg("--data-dir")
        .arg(dir)
        .args(["--etcd-client-address", "127.0.0.1"])
        .args(["--etcd-client-port", &client_port.to_string()])
        .args(["--etcd-peer-port", &peer_port.to_string()])
        .args([
            "--etcd-auto-compaction-retention",
            "0",
            "--disable-apiserver",
        ])
        .args(extra)
        .env_remove("K3RS_DATA_DIR")
        .env_remove("K3RS_ETCD_CLIENT_PORT");
    cmd
}

/// Starts a server that joins through `join_peer`, with the first server's etcd CAs.
fn start_joiner(first_tls: &Path, join_peer: &str, peer_port: u16) -> Joiner {
    let dir = tempfile::Builder::new()
        .prefix("k3rs-ha-")
        .tempdir()
        .unwrap();
    let tls = dir.path().join("server/tls/etcd");
    std::fs::create_dir_all(&tls).unwrap();
    for f in [
        "server-ca.crt",
        "server-ca.key",
        "peer-ca.crt",
        "peer-ca.key",
    ] {
        std::fs::copy(first_tls.join(f), tls.join(f)).unwrap();
    }
    let client_port = free_port();
    let cmd = server_command(
        dir.path(),
        client_port,
        peer_port,
        &["--etcd-join-peer", join_peer],
    );
    let mut j = Joiner {
        proc: None,
        dir,
        client_port,
        peer_port,
    };
    j.spawn(cmd);
    j
}

impl Joiner {
    /// Runs `cmd` for this server's data dir and waits until it answers.
    fn spawn(&mut self, cmd: Command) {
        let log = self.dir.path().join("k3rs.log");
        self.proc = Some(ChildGuard::spawn("k3rs server", cmd, &log));
        let ep = self.endpoint();
        wait_for("the server to answer", Duration::from_secs(60), || {
            self.proc.as_mut().unwrap().assert_running();
            let ready = self.tls_dir().join("client.key").exists()
                && etcdctl_with_timeout(&ep, &["get", "x"], None, Duration::from_secs(5)).success();
            ready.then_some(())
        });
    }
}

fn three_started_voters(ep: &Endpoint) -> Option<()> {
    started_voters(ep, 3)
}

#[test]
fn three_servers_join_with_member_add_and_survive_the_leader() {
    let p1 = free_port();
    let mut first = K3rs::start_with(&[
        "--etcd-auto-compaction-retention",
        "0",
        "--etcd-peer-port",
        &p1.to_string(),
    ]);
    let ep1 = first.endpoint();
    let first_tls = first.etcd_tls_dir();
    etcdctl(&ep1, &["put", "before", "1"], None).expect_ok("put before joining");

    let mut joiners = Vec::new();
    for i in 2..=3 {
        let peer_port = free_port();
        let out = etcdctl(
            &ep1,
            &[
                "member",
                "add",
                &format!("s{i}"),
                &format!("--peer-urls={}", peer_url(peer_port)),
            ],
            None,
        )
        .expect_ok("member add");
        assert!(out.stdout.contains("Member"), "{out:?}");
        let j = start_joiner(&first_tls, &peer_url(p1), peer_port);
        // Promoted once caught up.
        wait_for(
            "the new member to be a voter",
            Duration::from_secs(30),
            || {
                let m = members(&ep1)?;
                (m.len() == i
                    && m.iter()
                        .all(|(_, _, started, learner)| *started && !learner))
                .then_some(())
            },
        );
        joiners.push(j);
    }
    let eps = [ep1.clone(), joiners[0].endpoint(), joiners[1].endpoint()];
    for ep in &eps {
        wait_for("three started voters", Duration::from_secs(30), || {
            three_started_voters(ep)
        });
    }
    // Written on one member, read (linearizably) on the others.
    etcdctl(&eps[2], &["put", "k", "from-s3"], None).expect_ok("put on s3");
    for ep in &eps {
        let out = etcdctl(ep, &["get", "k", "--print-value-only"], None).expect_ok("get");
        assert_eq!(out.stdout.trim(), "from-s3");
        let out = etcdctl(ep, &["get", "before", "--print-value-only"], None).expect_ok("get");
        assert_eq!(out.stdout.trim(), "1");
    }

    // Kill the first server (SIGKILL); the others elect a leader and take writes.
    let killed = Instant::now();
    first.kill();
    wait_for(
        "a write after the first server died",
        Duration::from_secs(20),
        || {
            let out = etcdctl_with_timeout(
                &eps[1],
                &["put", "after", "2"],
                None,
                Duration::from_secs(5),
            );
            out.success().then_some(())
        },
    );
    println!(
        "writes succeed again {:?} after SIGKILL of the first server",
        killed.elapsed()
    );
    let out = etcdctl(&eps[2], &["get", "after", "--print-value-only"], None).expect_ok("get");
    assert_eq!(out.stdout.trim(), "2");
    for j in &mut joiners {
        j.proc.as_mut().unwrap().assert_running();
    }

    // Lose the majority for good: the last server cannot write; `--cluster-reset` makes it a
    // cluster of one with its data and exits; started again (without the flag), it serves.
    let mut last = joiners.pop().unwrap();
    let mut other = joiners.pop().unwrap();
    other.proc.take().unwrap().kill();
    let ep = last.endpoint();
    let out = etcdctl_with_timeout(&ep, &["put", "lost", "x"], None, Duration::from_secs(10));
    assert!(!out.success(), "{out:?}");
    last.proc.take().unwrap().kill();
    let peer_port = last.peer_port;
    let reset = server_command(
        last.dir.path(),
        last.client_port,
        peer_port,
        &["--cluster-reset"],
    );
    let log = last.dir.path().join("reset.log");
    let status = ChildGuard::spawn("k3rs server --cluster-reset", reset, &log)
        .wait_exit(Duration::from_secs(60));
    assert!(
        status.is_some_and(|s| s.success()),
        "k3rs server --cluster-reset: {status:?}\n{}",
        common::log_tail(&log, 40)
    );
    let cmd = server_command(last.dir.path(), last.client_port, peer_port, &[]);
    last.spawn(cmd);
    let m = members(&ep).unwrap();
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(m[0].2 && !m[0].3, "{m:?}");
    let out = etcdctl(&ep, &["get", "after", "--print-value-only"], None).expect_ok("get");
    assert_eq!(out.stdout.trim(), "2");
    etcdctl(&ep, &["put", "after-reset", "3"], None).expect_ok("put after reset");
}
