//! A 3-member k3rs cluster vs 3-member etcd 3.4 clusters on the same machine, all members on
//! loopback, all durable (fsync on every commit), driven by the same generated tonic client
//! (`k3rs_datastore::etcdpb`): k3rs over mTLS as shipped (servers joined by token, mTLS between
//! peers), etcd with mTLS on the client and peer ports (certificates made by the bench), and
//! etcd over plain http. The clusters run one after the other, never at once. Prints a
//! markdown table and writes it to `benches/results/ha_compare.md` (or `$BENCH_OUT`).
//!
//! Measured: puts from one client on the leader and on a follower (which forwards), puts from
//! 64 clients spread over the three members, linearizable ranges (ReadIndex) from one client on
//! a follower and from 64 spread clients, and the time from a SIGKILL of the leader until a put
//! through a surviving member succeeds. Before those, on the fresh cluster, `etcdctl check
//! perf` (loads from `$BENCH_CHECK_PERF`, default `s,m,l`) against all three members; k3rs'
//! write-path breakdown is then read from its leader's `/metrics`.
//!
//! Run: `cargo bench --bench ha_compare` (builds k3rs in release). Each timed measurement runs
//! for `$BENCH_SECS` seconds (default 5). `BENCH_ONLY=k3rs|etcd-tls|etcd` measures one system.

// A benchmark: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::check_perf::{
    check_perf, check_perf_loads, k3rs_stages, stage_table, CheckPerf, StageRow,
};
use common::client::{channel, Clients};
use common::kv_load::{load, put_op, range_op, KEYS};
use common::stats::{commit, machine, ratio, write_result, Load};
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
    /// `etcdctl check perf` against all members, per load.
    check_perf: Vec<CheckPerf>,
    /// k3rs' write-path stages on the leader after `check perf --load=s` (empty for etcd).
    stages: Vec<StageRow>,
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
        ..Report::default()
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

/// Picks one phase's load out of a report.
type Phase = fn(&Report) -> &Load;

/// A row: name, then the k3rs, etcd mTLS and etcd http cells and values (NaN: none).
type Row = (String, [String; 3], [f64; 3]);

fn table(k: &Report, t: &Report, e: &Report, secs: Duration) -> String {
    let all = [k, t, e];
    let mut rows: Vec<Row> = Vec::new();
    let mut number = |name: String, values: [f64; 3], decimals: usize| {
        let cells = values.map(|v| {
            if v.is_nan() {
                "–".to_string()
            } else {
                format!("{v:.decimals$}")
            }
        });
        rows.push((name, cells, values));
    };
    let phases: [(&str, Phase); 5] = [
        ("put, 1 client on the leader", |r| &r.put1_leader),
        ("put, 1 client on a follower", |r| &r.put1_follower),
        ("put, 64 clients over 3 members", |r| &r.put64),
        ("linearizable range, 1 client on a follower", |r| {
            &r.range1_follower
        }),
        ("linearizable range, 64 clients over 3 members", |r| {
            &r.range64
        }),
    ];
    for (name, load) in phases {
        let rate = all.map(|r| load(r).rate());
        number(format!("{name}: throughput (ops/s)"), rate, 0);
        for (label, m) in [("p50", 500), ("p99", 990), ("p99.9", 999), ("max", 1000)] {
            let lat = all.map(|r| load(r).per_mille(m));
            number(format!("{name}: {label} (ms)"), lat, 2);
        }
    }
    let mut verdicts = Vec::new();
    for load in check_perf_loads() {
        let got = all.map(|r| r.check_perf.iter().find(|c| c.load == load).cloned());
        let value = |f: fn(&CheckPerf) -> f64| got.clone().map(|c| c.as_ref().map_or(f64::NAN, f));
        let name = format!("`check perf --load={load}`");
        number(
            format!("{name}: throughput (writes/s)"),
            value(|c| c.throughput),
            0,
        );
        number(
            format!("{name}: slowest request (ms)"),
            value(|c| c.slowest * 1000.0),
            2,
        );
        number(
            format!("{name}: stddev (ms)"),
            value(|c| c.stddev * 1000.0),
            2,
        );
        let verdict = |c: &Option<CheckPerf>| match c {
            Some(c) if c.pass => "PASS",
            Some(_) => "FAIL",
            None => "–",
        };
        verdicts.push(format!(
            "{name}: k3rs {}, etcd mTLS {}, etcd http {}",
            verdict(&got[0]),
            verdict(&got[1]),
            verdict(&got[2])
        ));
    }
    let secs_of = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64());
    let show = |d: Option<Duration>| {
        d.map_or(format!("> {} s", FAILOVER_CAP.as_secs()), |d| {
            format!("{:.2}", d.as_secs_f64())
        })
    };
    rows.push((
        "SIGKILL of the leader → first put through a survivor (s)".into(),
        all.map(|r| show(r.failover)),
        all.map(|r| secs_of(r.failover)),
    ));
    let mut out = String::from(
        "| measurement | k3rs (mTLS) | etcd 3.4 (mTLS) | etcd 3.4 (http) | k3rs / etcd mTLS | \
         k3rs / etcd http |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (name, [a, b, c], [x, y, z]) in rows {
        let (rt, rh) = (ratio(x, y), ratio(x, z));
        out.push_str(&format!("| {name} | {a} | {b} | {c} | {rt} | {rh} |\n"));
    }
    out.push_str(&format!(
        "\nThree members each, default election timeouts (k3rs 1 s, etcd 1 s). Timed phases run {} s \
         each over {KEYS} keys with 256 B values; \"over 3 members\" deals the clients round-robin \
         to the members, up to 8 connections per member. Failover is one SIGKILL per system. \
         `etcdctl check perf` runs first, on the fresh cluster, against all three members, 60 s \
         per load; its verdicts (PASS: ≥ 90 % of the target rate, slowest < 500 ms, stddev < \
         100 ms): {}.\n",
        secs.as_secs(),
        verdicts.join("; ")
    ));
    if !k.stages.is_empty() {
        out.push_str(&format!(
            "\nk3rs' write path on the leader after `check perf --load=s` (server-side stage \
             histograms on `/metrics`, since start; percentiles are bucket bounds):\n\n{}",
            stage_table(&k.stages)
        ));
    }
    out
}

fn run(rt: &tokio::runtime::Runtime, mut members: Members, secs: Duration) -> Report {
    let eps = members.endpoints();
    let mut check = Vec::new();
    let mut stages = Vec::new();
    for load in check_perf_loads() {
        eprintln!("  etcdctl check perf --load={load}");
        check.extend(check_perf(&eps, &load));
        if matches!(members, Members::K3rs(_)) && load == "s" {
            let lead = rt.block_on(leader(&eps));
            stages = k3rs_stages(&eps[lead]);
        }
    }
    let mut r = rt.block_on(measure(&eps, secs));
    eprintln!("  failover");
    r.failover = rt.block_on(failover(&mut members));
    r.check_perf = check;
    r.stages = stages;
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
        eprintln!("etcd 3.4, 3 members, http ...");
        e = run(&rt, Members::Etcd(Etcd::start_cluster(3)), secs);
    }
    let mut t = Report::default();
    if only.is_empty() || only == "etcd-tls" {
        eprintln!("etcd 3.4, 3 members, mTLS ...");
        t = run(&rt, Members::Etcd(Etcd::start_cluster_tls(3)), secs);
    }
    let mut k = Report::default();
    if only.is_empty() || only == "k3rs" {
        eprintln!("k3rs, 3 servers ...");
        k = run(&rt, Members::k3rs(), secs);
    }
    let at = commit();
    let at = if at.is_empty() {
        at
    } else {
        format!(" at {at}")
    };
    let text = format!(
        "3-member k3rs vs 3-member etcd 3.4 — `cargo bench --bench ha_compare`{at}, {}; all \
         members durable (fsync per commit) on loopback of one machine, the clusters run one \
         after the other on the same 2 shared cores; k3rs over mTLS, etcd over mTLS (client \
         and peer ports) and over plain http.\n\n{}",
        machine(),
        table(&k, &t, &e, secs)
    );
    println!("{text}");
    if !only.is_empty() {
        return;
    }
    write_result("ha_compare", &text);
}
