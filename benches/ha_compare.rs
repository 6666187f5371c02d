//! A 3-member k3rs cluster vs a 3-member etcd 3.4 cluster on the same machine, all members on
//! loopback, all durable (fsync on every commit), driven by the same generated tonic client
//! (`k3rs_datastore::etcdpb`): k3rs over mTLS as shipped (servers joined by token), etcd over
//! plain http. Prints a markdown table and writes it to `benches/results/ha_compare.md` (or
//! `$BENCH_OUT`).
//!
//! Measured: puts from one client on the leader and on a follower (which forwards), puts from
//! 64 clients spread over the three members, linearizable ranges (ReadIndex) from one client on
//! a follower and from 64 spread clients, and the time from a SIGKILL of the leader until a put
//! through a surviving member succeeds.
//!
//! Run: `cargo bench --bench ha_compare` (builds k3rs in release). Each timed measurement runs
//! for `$BENCH_SECS` seconds (default 5).

// A benchmark: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::client::{channel, Clients};
use common::kv_load::{load, put_op, range_op, KEYS};
use common::stats::{machine, ratio, write_result, Load};
use common::{Endpoint, Etcd, K3rs};
use k3rs_datastore::etcdpb::kv_client::KvClient;
use k3rs_datastore::etcdpb::{PutRequest, StatusRequest};

/// How long the failover measurement waits at most.
const FAILOVER_CAP: Duration = Duration::from_secs(30);

/// Results of one cluster.
#[derive(Debug, Default)]
struct Report {
    put1_leader: Load,
    put1_follower: Load,
    put64: Load,
    range1_follower: Load,
    range64: Load,
    /// SIGKILL of the leader → first successful put through a survivor (`None`: not within
    /// [`FAILOVER_CAP`]).
    failover: Option<Duration>,
}

/// Three members of one system, killable by index.
enum Members {
    K3rs(Vec<K3rs>),
    Etcd(Vec<Etcd>),
}

impl Members {
    fn k3rs() -> Members {
        let peer = |p: &String| {
            vec![
                "--etcd-peer-port".to_string(),
                p.clone(),
                "--etcd-auto-compaction-retention".into(),
                "0".into(),
            ]
        };
        let ports: Vec<String> = (0..3).map(|_| common::free_port().to_string()).collect();
        let args0 = peer(&ports[0]);
        let first = K3rs::start_with(&args0.iter().map(String::as_str).collect::<Vec<_>>());
        let token = first.token();
        let mut servers = vec![first];
        for p in &ports[1..] {
            let args = peer(p);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            servers.push(K3rs::join(&servers[0], &token, &args));
        }
        let ep = servers[0].endpoint();
        common::wait_for("three started voters", Duration::from_secs(60), || {
            common::etcdctl::started_voters(&ep, 3)
        });
        Members::K3rs(servers)
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        match self {
            Members::K3rs(s) => s.iter().map(K3rs::endpoint).collect(),
            Members::Etcd(s) => s.iter().map(Etcd::endpoint).collect(),
        }
    }

    fn kill(&mut self, i: usize) {
        match self {
            Members::K3rs(s) => s[i].kill(),
            Members::Etcd(s) => s[i].kill(),
        }
    }
}

/// The index of the member that leads, as every member's Status reports it.
async fn leader(eps: &[Endpoint]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut ids = Vec::new();
        let mut leaders = Vec::new();
        for ep in eps {
            let mut c = Clients::connect(ep).await.expect("connect");
            let s = c.maintenance.status(StatusRequest {}).await;
            let s = s.expect("status").into_inner();
            ids.push(s.header.expect("header").member_id);
            leaders.push(s.leader);
        }
        let agreed = leaders.iter().all(|l| *l == leaders[0] && *l != 0);
        if let Some(i) = ids.iter().position(|id| agreed && *id == leaders[0]) {
            return i;
        }
        assert!(Instant::now() < deadline, "no agreed leader: {leaders:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn measure(eps: &[Endpoint], secs: Duration) -> Report {
    let lead = leader(eps).await;
    let follower = std::slice::from_ref(&eps[(lead + 1) % eps.len()]);
    let on_leader = std::slice::from_ref(&eps[lead]);
    // Preload every key so reads hit real data.
    load(eps, 16, Duration::from_secs(60), KEYS, put_op).await;
    eprintln!("  put, 1 client on the leader");
    let put1_leader = load(on_leader, 1, secs, usize::MAX, put_op).await;
    eprintln!("  put, 1 client on a follower");
    let put1_follower = load(follower, 1, secs, usize::MAX, put_op).await;
    eprintln!("  put, 64 clients over 3 members");
    let put64 = load(eps, 64, secs, usize::MAX, put_op).await;
    eprintln!("  linearizable range, 1 client on a follower");
    let range1_follower = load(follower, 1, secs, usize::MAX, range_op).await;
    eprintln!("  linearizable range, 64 clients over 3 members");
    let range64 = load(eps, 64, secs, usize::MAX, range_op).await;
    Report {
        put1_leader,
        put1_follower,
        put64,
        range1_follower,
        range64,
        failover: None,
    }
}

/// SIGKILLs the leader, then puts through the next member (each try bounded by 1 s) until one
/// succeeds: the time from the kill to that success.
async fn failover(members: &mut Members) -> Option<Duration> {
    let eps = members.endpoints();
    let lead = leader(&eps).await;
    let survivor = &eps[(lead + 1) % eps.len()];
    let mut kv = KvClient::new(channel(survivor).await.expect("connect"));
    let killed = Instant::now();
    members.kill(lead);
    while killed.elapsed() < FAILOVER_CAP {
        let req = PutRequest {
            key: b"bench/failover".to_vec(),
            value: b"after".to_vec(),
            ..Default::default()
        };
        let put = tokio::time::timeout(Duration::from_secs(1), kv.put(req)).await;
        if matches!(put, Ok(Ok(_))) {
            return Some(killed.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

fn table(k: &Report, e: &Report, secs: Duration) -> String {
    let mut rows: Vec<[String; 4]> = Vec::new();
    let mut phase = |name: &str, a: &Load, b: &Load| {
        rows.push([
            format!("{name}: throughput (ops/s)"),
            format!("{:.0}", a.rate()),
            format!("{:.0}", b.rate()),
            ratio(a.rate(), b.rate()),
        ]);
        for p in [50, 99] {
            rows.push([
                format!("{name}: p{p} (ms)"),
                format!("{:.2}", a.pct(p)),
                format!("{:.2}", b.pct(p)),
                ratio(a.pct(p), b.pct(p)),
            ]);
        }
    };
    phase(
        "put, 1 client on the leader",
        &k.put1_leader,
        &e.put1_leader,
    );
    phase(
        "put, 1 client on a follower",
        &k.put1_follower,
        &e.put1_follower,
    );
    phase("put, 64 clients over 3 members", &k.put64, &e.put64);
    phase(
        "linearizable range, 1 client on a follower",
        &k.range1_follower,
        &e.range1_follower,
    );
    phase(
        "linearizable range, 64 clients over 3 members",
        &k.range64,
        &e.range64,
    );
    let secs_of = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64());
    let show = |d: Option<Duration>| {
        d.map_or(format!("> {} s", FAILOVER_CAP.as_secs()), |d| {
            format!("{:.2}", d.as_secs_f64())
        })
    };
    rows.push([
        "SIGKILL of the leader → first put through a survivor (s)".into(),
        show(k.failover),
        show(e.failover),
        ratio(secs_of(k.failover), secs_of(e.failover)),
    ]);
    let mut out =
        String::from("| measurement | k3rs | etcd 3.4 | k3rs / etcd |\n|---|---:|---:|---:|\n");
    for [a, b, c, d] in rows {
        out.push_str(&format!("| {a} | {b} | {c} | {d} |\n"));
    }
    out.push_str(&format!(
        "\nThree members each, default election timeouts (k3rs 1 s, etcd 1 s). Timed phases run {} s \
         each over {KEYS} keys with 256 B values; \"over 3 members\" deals the clients round-robin \
         to the members, up to 8 connections per member. Failover is one SIGKILL per system.\n",
        secs.as_secs()
    ));
    out
}

fn run(rt: &tokio::runtime::Runtime, mut members: Members, secs: Duration) -> Report {
    let eps = members.endpoints();
    let mut r = rt.block_on(measure(&eps, secs));
    eprintln!("  failover");
    r.failover = rt.block_on(failover(&mut members));
    r
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` / `cargo test --benches` probes
    }
    let secs = Duration::from_secs(common::stats::env_usize("BENCH_SECS", 5) as u64);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // BENCH_ONLY=etcd or BENCH_ONLY=k3rs measures one side (for working on the benchmark).
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let mut e = Report::default();
    if only.is_empty() || only == "etcd" {
        eprintln!("etcd 3.4, 3 members ...");
        e = run(&rt, Members::Etcd(Etcd::start_cluster(3)), secs);
    }
    let mut k = Report::default();
    if only.is_empty() || only == "k3rs" {
        eprintln!("k3rs, 3 servers ...");
        k = run(&rt, Members::k3rs(), secs);
    }
    let text = format!(
        "3-member k3rs vs 3-member etcd 3.4 — `cargo bench --bench ha_compare`, {}; all members \
         durable (fsync per commit) on loopback of one machine; k3rs over mTLS, etcd over plain \
         http.\n\n{}",
        machine(),
        table(&k, &e, secs)
    );
    println!("{text}");
    if !only.is_empty() {
        return;
    }
    write_result("ha_compare", &text);
}
