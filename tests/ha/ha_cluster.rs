//! End-to-end: real `k3rs server` processes on 127.0.0.1 form one cluster by token, as k3s
//! servers do: `k3rs server --server https://<existing>:<https port> --token <token>` on a
//! fresh data dir (the HTTPS port serves only the supervisor routes: `--disable-apiserver`).
//! `etcdctl member list` then shows three started voters on every member, writes on one are
//! read (linearizably) on another, and after the leader is killed (SIGKILL) the others elect
//! a new one. Then the majority is lost for good and the last server is rebuilt with
//! `--cluster-reset`. Also: tokens that must be refused, and a removed member.

use std::time::{Duration, Instant};

use crate::common;
use crate::common::etcdctl::{etcdctl_with_timeout, member_id, members, started_voters};
use crate::common::{etcdctl, free_port, log_tail, wait_for, Endpoint, K3rs};

/// `GET /metrics` on the server's HTTPS port, with the admin client certificate when
/// `authn`: `(status code, body)`.
fn scrape(server: &K3rs, authn: bool) -> (u16, String) {
    let tls = server.data_dir().join("server/tls");
    let (cert, key) = (tls.join("client-admin.crt"), tls.join("client-admin.key"));
    let client = authn.then_some((cert.as_path(), key.as_path()));
    let url = format!("{}/metrics", server.server_url());
    common::https::request("GET", &url, &tls.join("server-ca.crt"), client)
}

/// The value of the etcd metric `name` (without labels) on `server`.
fn metric(server: &K3rs, name: &str) -> u64 {
    let (_, text) = scrape(server, true);
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics: {text}"))
}

/// A server with its own peer port (and compaction off).
fn server_args(peer_port: &str) -> Vec<&str> {
    vec![
        "--etcd-auto-compaction-retention",
        "0",
        "--etcd-peer-port",
        peer_port,
    ]
}

#[test]
fn three_servers_join_by_token_and_survive_the_leader() {
    let p1 = free_port().to_string();
    let first = K3rs::start_with(&server_args(&p1));
    let ep1 = first.endpoint();
    etcdctl(&ep1, &["put", "before", "1"], None).expect_ok("put before joining");
    let token = first.token();
    assert!(token.starts_with("K10"), "{token}");

    // The second joins with the full token; the third through the second, with the bare
    // secret (no CA pinning, as in k3s).
    let p2 = free_port().to_string();
    let second = K3rs::join(&first, &token, &server_args(&p2));
    assert_eq!(
        second.token(),
        token,
        "joined servers hand out the same token"
    );
    wait_for("two started voters", Duration::from_secs(30), || {
        started_voters(&ep1, 2)
    });
    let secret = token.rsplit(':').next().unwrap().to_string();
    let p3 = free_port().to_string();
    let mut third = K3rs::join(&second, &secret, &server_args(&p3));
    let mut servers = [first, second];

    let mut eps: Vec<Endpoint> = servers.iter().map(K3rs::endpoint).collect();
    eps.push(third.endpoint());
    for ep in &eps {
        wait_for("three started voters", Duration::from_secs(30), || {
            started_voters(ep, 3)
        });
    }
    // Peer URLs are the --node-ip addresses with each server's peer port.
    let m = members(&ep1).unwrap();
    for p in [&p1, &p2, &p3] {
        let url = format!("https://127.0.0.1:{p}");
        assert!(m.iter().any(|m| m.1 == url), "{m:?}");
    }
    // Written on one member, read (linearizably) on the others.
    etcdctl(&eps[2], &["put", "k", "from-s3"], None).expect_ok("put on s3");
    for ep in &eps {
        let out = etcdctl(ep, &["get", "k", "--print-value-only"], None).expect_ok("get");
        assert_eq!(out.stdout.trim(), "from-s3");
        let out = etcdctl(ep, &["get", "before", "--print-value-only"], None).expect_ok("get");
        assert_eq!(out.stdout.trim(), "1");
    }
    // A restarted joined server does not join again (its data dir has the membership).
    third.restart();
    wait_for(
        "three started voters after a restart",
        Duration::from_secs(30),
        || started_voters(&eps[0], 3),
    );
    assert!(third.log().contains("not joining again"), "{}", third.log());

    // Metrics in etcd's names on the HTTPS port (client certificate required).
    let (code, body) = scrape(&servers[1], false);
    assert_eq!(code, 401, "{body}");
    assert_eq!(metric(&servers[1], "etcd_server_has_leader"), 1);
    let committed = metric(&servers[0], "etcd_server_proposals_committed_total");
    let fsyncs = metric(&servers[0], "etcd_disk_wal_fsync_duration_seconds_count");
    for i in 0..3 {
        etcdctl(&eps[0], &["put", &format!("m{i}"), "v"], None).expect_ok("put");
    }
    assert!(metric(&servers[0], "etcd_server_proposals_committed_total") >= committed + 3);
    assert!(metric(&servers[0], "etcd_server_proposals_applied_total") >= committed + 3);
    assert!(metric(&servers[0], "etcd_mvcc_db_total_size_in_bytes") > 0);
    // Every member fsyncs the entries it appends to its WAL.
    assert!(metric(&servers[0], "etcd_disk_wal_fsync_duration_seconds_count") > fsyncs);
    let changes = metric(&servers[1], "etcd_server_leader_changes_seen_total");
    assert!(changes >= 1);
    let first_led = metric(&servers[0], "etcd_server_is_leader") == 1;

    // Kill the first server (SIGKILL); the others elect a leader and take writes.
    let killed = Instant::now();
    servers[0].kill();
    let mut last = String::new();
    let mut written = false;
    while !written && killed.elapsed() < Duration::from_secs(20) {
        let out = etcdctl_with_timeout(
            &eps[1],
            &["put", "after", "2"],
            None,
            Duration::from_secs(5),
        );
        written = out.success();
        last = format!("{out:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        written,
        "no write within 20 s after the first server died; last: {last}\n\
         second server:\n{}\nthird server:\n{}",
        log_tail(&servers[1].log_path(), 60),
        log_tail(&third.log_path(), 60)
    );
    println!(
        "writes succeed again {:?} after SIGKILL of the first server",
        killed.elapsed()
    );
    let out = etcdctl(&eps[2], &["get", "after", "--print-value-only"], None).expect_ok("get");
    assert_eq!(out.stdout.trim(), "2");
    servers[1].assert_running();
    third.assert_running();
    if first_led {
        assert!(metric(&servers[1], "etcd_server_leader_changes_seen_total") > changes);
    }

    // Lose the majority for good: the last server cannot write; `--cluster-reset` makes it a
    // cluster of one with its data and exits; started again (without the flag), it serves.
    servers[1].kill();
    let ep = third.endpoint();
    let out = etcdctl_with_timeout(&ep, &["put", "lost", "x"], None, Duration::from_secs(10));
    assert!(!out.success(), "{out:?}");
    let status = third.run_once_with(&["--cluster-reset"], Duration::from_secs(60));
    assert!(
        status.is_some_and(|s| s.success()),
        "k3rs server --cluster-reset: {status:?}\n{}",
        third.log()
    );
    third.restart();
    let m = members(&ep).unwrap();
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(m[0].2 && !m[0].3, "{m:?}");
    let out = etcdctl(&ep, &["get", "after", "--print-value-only"], None).expect_ok("get");
    assert_eq!(out.stdout.trim(), "2");
    etcdctl(&ep, &["put", "after-reset", "3"], None).expect_ok("put after reset");
}

#[test]
fn tokens_with_a_wrong_ca_hash_or_secret_are_refused_and_change_nothing() {
    let p1 = free_port().to_string();
    let first = K3rs::start_with(&server_args(&p1));
    let ep = first.endpoint();
    let before = members(&ep).unwrap();
    assert_eq!(before.len(), 1);
    let token = first.token();
    let (hash, creds) = token
        .strip_prefix("K10")
        .and_then(|t| t.split_once("::"))
        .unwrap();
    let url = first.server_url();

    // A token pinning another CA: refused before the secret is sent.
    let other_ca = format!("K10{}::{creds}", "0".repeat(64));
    let log = refused_join(&url, &other_ca);
    assert!(
        log.contains("token CA hash does not match the Cluster CA certificate hash")
            && log.contains(hash),
        "{log}"
    );
    // The right CA, a wrong secret: 401.
    let log = refused_join(&url, &format!("K10{hash}::server:not-the-secret"));
    assert!(log.contains("401 Unauthorized (wrong secret)"), "{log}");

    // Neither changed the cluster.
    assert_eq!(members(&ep).unwrap(), before);
    etcdctl(&ep, &["put", "still", "writable"], None).expect_ok("put");
}

/// Starts a server joining `url` with `token`, which must exit with an error without having
/// received anything of the cluster; returns its log.
fn refused_join(url: &str, token: &str) -> String {
    let p = free_port().to_string();
    let mut args = vec!["--server", url, "--token", token];
    args.extend(server_args(&p));
    let (status, log, dir) = K3rs::run_to_exit(&args, Duration::from_secs(60));
    assert!(status.is_some_and(|s| !s.success()), "{status:?}\n{log}");
    assert!(
        !dir.path().join("data/server/tls/etcd/peer-ca.key").exists(),
        "nothing of the cluster was received"
    );
    log
}

#[test]
fn a_removed_server_stops_and_rejoins_with_a_fresh_data_dir() {
    let p1 = free_port().to_string();
    let first = K3rs::start_with(&server_args(&p1));
    let ep = first.endpoint();
    let token = first.token();
    let p2 = free_port().to_string();
    let mut second = K3rs::join(&first, &token, &server_args(&p2));
    wait_for("two started voters", Duration::from_secs(30), || {
        started_voters(&ep, 2)
    });
    let peer2 = format!("https://127.0.0.1:{p2}");
    let id = member_id(&ep, &peer2).unwrap();
    etcdctl(&ep, &["member", "remove", &id], None).expect_ok("member remove");

    // Like etcd, the removed member stops (with an error naming the removal).
    let status = second.wait_exit(Duration::from_secs(30));
    assert!(status.is_some_and(|s| !s.success()), "{status:?}");
    assert!(
        second.log().contains("removed from the cluster"),
        "{}",
        second.log()
    );
    let m = members(&ep).unwrap();
    assert_eq!(m.len(), 1, "{m:?}");
    etcdctl(&ep, &["put", "after-remove", "1"], None).expect_ok("put");

    // A fresh data dir joins again by token (same peer URL, new member ID).
    let again = K3rs::join(&first, &token, &server_args(&p2));
    wait_for("two started voters again", Duration::from_secs(30), || {
        started_voters(&ep, 2)
    });
    let rejoined = member_id(&ep, &peer2).unwrap();
    assert_ne!(rejoined, id, "a new member ID");
    let out = etcdctl(
        &again.endpoint(),
        &["get", "after-remove", "--print-value-only"],
        None,
    )
    .expect_ok("get on the rejoined server");
    assert_eq!(out.stdout.trim(), "1");
}
