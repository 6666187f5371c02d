//! k3rs vs etcd 3.4 on the same machine, both durable (fsync on every commit), both on loopback,
//! both driven by the same generated tonic client (`k3rs_datastore::etcdpb`): k3rs over mTLS as
//! shipped, etcd over plain http. Prints a markdown table and writes it to
//! `benches/results/etcd_compare.md` (or `$BENCH_OUT`).
//!
//! Run: `cargo bench --bench etcd_compare` (builds k3rs in release). Each timed measurement
//! runs for `$BENCH_SECS` seconds (default 5); the churn phase is capped at 150 s.

// A benchmark: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::client::{channel, open_watch, Clients};
use common::kv_load::{key, load, put_op, range_op, KEYS, VALUE_LEN};
use common::stats::{machine, ratio, write_result, Load};
use common::{Endpoint, Etcd, K3rs};
use k3rs_datastore::etcdpb::kv_client::KvClient;
use k3rs_datastore::etcdpb::{
    CompactionRequest, DefragmentRequest, PutRequest, RangeRequest, WatchCreateRequest,
};

const CHURN_UPDATES: usize = 200_000;
const CHURN_CAP: Duration = Duration::from_secs(150);

/// Results of one store.
#[derive(Debug, Default)]
struct Report {
    put1: Load,
    put64: Load,
    range1: Load,
    range64: Load,
    watch: Load,
    churn_updates: usize,
    churn_secs: f64,
    disk_after_churn: u64,
    disk_after_compact: u64,
    /// Where the bytes are after compaction: (path below the data dir, bytes), largest first.
    disk_breakdown: Vec<(String, u64)>,
}

/// Put → event latency on one watched key.
async fn watch_latency(ep: &Endpoint, dur: Duration) -> Load {
    let mut c = Clients::connect(ep).await.expect("connect");
    let create = WatchCreateRequest {
        key: b"bench/watch".to_vec(),
        ..Default::default()
    };
    let mut w = open_watch(&mut c, create).await.expect("watch");
    let events = &mut w.responses;
    let created = events.message().await.expect("watch created");
    assert!(created.is_some_and(|r| r.created), "watch not created");
    let mut kv = KvClient::new(channel(ep).await.expect("connect"));
    let start = Instant::now();
    let mut lat = Vec::new();
    while start.elapsed() < dur && lat.len() < 5000 {
        let t = Instant::now();
        let req = PutRequest {
            key: b"bench/watch".to_vec(),
            value: vec![1; 64],
            ..Default::default()
        };
        let rev = kv
            .put(req)
            .await
            .expect("put")
            .into_inner()
            .header
            .expect("header")
            .revision;
        loop {
            let resp = events
                .message()
                .await
                .expect("watch stream")
                .expect("watch open");
            if resp
                .events
                .iter()
                .any(|e| e.kv.as_ref().is_some_and(|kv| kv.mod_revision >= rev))
            {
                break;
            }
        }
        lat.push(t.elapsed());
    }
    Load {
        ops: lat.len(),
        secs: start.elapsed().as_secs_f64(),
        lat,
    }
}

async fn measure(ep: Endpoint, data_dir: PathBuf, secs: Duration) -> Report {
    let mut r = Report::default();
    // Preload every key so reads hit real data.
    load(
        std::slice::from_ref(&ep),
        16,
        Duration::from_secs(60),
        KEYS,
        put_op,
    )
    .await;
    eprintln!("  put, 1 client");
    r.put1 = load(std::slice::from_ref(&ep), 1, secs, usize::MAX, put_op).await;
    eprintln!("  put, 64 clients");
    r.put64 = load(std::slice::from_ref(&ep), 64, secs, usize::MAX, put_op).await;
    eprintln!("  range, 1 client");
    r.range1 = load(std::slice::from_ref(&ep), 1, secs, usize::MAX, range_op).await;
    eprintln!("  range, 64 clients");
    r.range64 = load(std::slice::from_ref(&ep), 64, secs, usize::MAX, range_op).await;
    eprintln!("  watch latency");
    r.watch = watch_latency(&ep, secs).await;
    eprintln!("  churn: {CHURN_UPDATES} updates over {KEYS} keys");
    let churn = load(
        std::slice::from_ref(&ep),
        64,
        CHURN_CAP,
        CHURN_UPDATES,
        put_op,
    )
    .await;
    r.churn_updates = churn.ops;
    r.churn_secs = churn.secs;
    r.disk_after_churn = common::disk_usage(&data_dir);
    let mut c = Clients::connect(&ep).await.expect("connect");
    let rev =
        c.kv.range(RangeRequest {
            key: key(0),
            ..Default::default()
        })
        .await;
    let rev = rev
        .expect("range")
        .into_inner()
        .header
        .expect("header")
        .revision;
    c.kv.compact(CompactionRequest {
        revision: rev,
        physical: true,
    })
    .await
    .expect("compact");
    c.maintenance
        .defragment(DefragmentRequest {})
        .await
        .expect("defragment");
    tokio::time::sleep(Duration::from_secs(2)).await;
    r.disk_after_compact = common::disk_usage(&data_dir);
    let depth = std::env::var("BENCH_BREAKDOWN_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok());
    r.disk_breakdown = breakdown(&data_dir, depth.unwrap_or(3));
    r
}

/// Sizes of the directories and files `depth` levels below `dir` (and above a tenth of a MiB).
fn breakdown(dir: &std::path::Path, depth: usize) -> Vec<(String, u64)> {
    fn walk(
        base: &std::path::Path,
        dir: &std::path::Path,
        depth: usize,
        out: &mut Vec<(String, u64)>,
    ) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let is_dir = path.is_dir();
            if is_dir && depth > 1 {
                walk(base, &path, depth - 1, out);
                continue;
            }
            let size = if is_dir {
                common::disk_usage(&path)
            } else {
                use std::os::unix::fs::MetadataExt;
                entry.metadata().map_or(0, |m| m.blocks() * 512)
            };
            if size > 100 * 1024 {
                let rel = path.strip_prefix(base).unwrap_or(&path);
                out.push((rel.display().to_string(), size));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, depth, &mut out);
    out.sort_by_key(|e| std::cmp::Reverse(e.1));
    out
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

fn table(k: &Report, e: &Report, secs: Duration) -> String {
    let mut rows: Vec<(String, String, String, String)> = Vec::new();
    let mut rate = |name: &str, a: &Load, b: &Load| {
        rows.push((
            name.into(),
            format!("{:.0}", a.rate()),
            format!("{:.0}", b.rate()),
            ratio(a.rate(), b.rate()),
        ));
    };
    rate("put throughput, 1 client (ops/s)", &k.put1, &e.put1);
    rate("put throughput, 64 clients (ops/s)", &k.put64, &e.put64);
    rate(
        "linearizable range throughput, 1 client (ops/s)",
        &k.range1,
        &e.range1,
    );
    rate(
        "linearizable range throughput, 64 clients (ops/s)",
        &k.range64,
        &e.range64,
    );
    let mut lat = |name: &str, a: &Load, b: &Load| {
        for p in [50, 99] {
            rows.push((
                format!("{name} p{p} (ms)"),
                format!("{:.2}", a.pct(p)),
                format!("{:.2}", b.pct(p)),
                ratio(a.pct(p), b.pct(p)),
            ));
        }
    };
    lat("put latency, 1 client,", &k.put1, &e.put1);
    lat("put latency, 64 clients,", &k.put64, &e.put64);
    lat("watch event latency (put → event),", &k.watch, &e.watch);
    let updates = k.churn_updates.min(e.churn_updates);
    rows.push((
        format!("on-disk size after {updates} updates over {KEYS} keys"),
        mib(k.disk_after_churn),
        mib(e.disk_after_churn),
        ratio(k.disk_after_churn as f64, e.disk_after_churn as f64),
    ));
    rows.push((
        "on-disk size after compaction + defragment".into(),
        mib(k.disk_after_compact),
        mib(e.disk_after_compact),
        ratio(k.disk_after_compact as f64, e.disk_after_compact as f64),
    ));
    let mut out = String::new();
    out.push_str("| measurement | k3rs | etcd 3.4 | k3rs / etcd |\n|---|---:|---:|---:|\n");
    for (a, b, c, d) in rows {
        out.push_str(&format!("| {a} | {b} | {c} | {d} |\n"));
    }
    let live = KEYS * (key(0).len() + VALUE_LEN);
    out.push_str(&format!(
        "\nLive data: {KEYS} keys × {VALUE_LEN} B values ≈ {:.2} MiB. Churn: k3rs {} updates in \
         {:.1} s, etcd {} in {:.1} s (capped at {} s). Timed phases run {} s each; 64 clients share \
         8 connections; values are {VALUE_LEN} B.\n",
        live as f64 / (1024.0 * 1024.0),
        k.churn_updates,
        k.churn_secs,
        e.churn_updates,
        e.churn_secs,
        CHURN_CAP.as_secs(),
        secs.as_secs(),
    ));
    for (name, r) in [("k3rs", k), ("etcd", e)] {
        let parts: Vec<String> = r
            .disk_breakdown
            .iter()
            .map(|(p, b)| format!("`{p}` {}", mib(*b)))
            .collect();
        out.push_str(&format!(
            "\n{name} disk after compaction + defragment: {}.\n",
            parts.join(", ")
        ));
    }
    out
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` / `cargo test --benches` probes
    }
    let secs = Duration::from_secs(
        std::env::var("BENCH_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build();
    let rt = rt.expect("runtime");

    // BENCH_ONLY=etcd or BENCH_ONLY=k3rs measures one side (for working on the benchmark).
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let mut e = Report::default();
    if only.is_empty() || only == "etcd" {
        eprintln!("etcd 3.4 ...");
        let etcd = Etcd::start();
        e = rt.block_on(measure(etcd.endpoint(), etcd.data_dir(), secs));
    }
    let mut k = Report::default();
    if only.is_empty() || only == "k3rs" {
        eprintln!("k3rs ...");
        let k3rs = K3rs::start_with(&[]);
        k = rt.block_on(measure(k3rs.endpoint(), k3rs.data_dir(), secs));
    }

    let text = format!(
        "k3rs vs etcd 3.4 — `cargo bench --bench etcd_compare`, {}; both durable (fsync per \
         commit), single member, loopback; k3rs over mTLS, etcd over plain http.\n\n{}",
        machine(),
        table(&k, &e, secs)
    );
    println!("{text}");
    if !only.is_empty() {
        return;
    }
    write_result("etcd_compare", &text);
}
