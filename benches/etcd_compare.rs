//! k3rs vs etcd 3.4 on the same machine, all durable (fsync on every commit), all on loopback,
//! all driven by the same generated tonic client (`k3rs_datastore::etcdpb`): k3rs over mTLS as
//! shipped, etcd over mTLS (`--cert-file`/`--key-file`/`--client-cert-auth`, certificates made
//! by the bench) and over plain http. The systems run one after the other, never at once.
//! Besides the timed phases, `etcdctl check perf` (etcd's steady-load check; loads from
//! `$BENCH_CHECK_PERF`, default `s,m,l`) runs against each, first, on a fresh member; k3rs'
//! write-path breakdown (`/metrics` stage histograms) is taken right after its first load (`s`
//! by default). `BENCH_CHECK_PERF_ONLY=1` stops there (no timed phases, no churn).
//! Prints markdown tables and writes them to `benches/results/etcd_compare.md` (or
//! `$BENCH_OUT`).
//!
//! Run: `cargo bench --bench etcd_compare` (builds k3rs in release). Each timed measurement
//! runs for `$BENCH_SECS` seconds (default 5); the churn phase is capped at 150 s.
//! `BENCH_ONLY=k3rs|etcd-tls|etcd` measures one system.

// A benchmark: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::check_perf::{
    check_perf, check_perf_loads, k3rs_stages, stage_table, CheckPerf, StageRow,
};
use common::client::{channel, open_watch, Clients};
use common::kv_load::{key, load, put_op, range_op, KEYS, VALUE_LEN};
use common::stats::{commit, machine, ratio, write_result, Load};
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
    /// `etcdctl check perf`, per load.
    check_perf: Vec<CheckPerf>,
    /// k3rs' write-path stages after its first `check perf` load (empty for etcd).
    stages: Vec<StageRow>,
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

/// `etcdctl check perf` for every load (blocking; etcdctl does the work), and for k3rs the
/// stage breakdown after the `s` load.
fn steady_loads(ep: &Endpoint, is_k3rs: bool) -> (Vec<CheckPerf>, Vec<StageRow>) {
    let mut results = Vec::new();
    let mut stages = Vec::new();
    for load in check_perf_loads() {
        eprintln!("  etcdctl check perf --load={load}");
        if let Some(r) = check_perf(std::slice::from_ref(ep), &load) {
            results.push(r);
        }
        if is_k3rs && stages.is_empty() {
            stages = k3rs_stages(ep);
        }
    }
    (results, stages)
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
    // Compacting and defragmenting a 200,000-revision history: minutes, not 10 s, allowed.
    let mut c = Clients::connect_with_timeout(&ep, Duration::from_secs(300))
        .await
        .expect("connect");
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

/// One row: a name, then k3rs, etcd over TLS and etcd over http, as numbers (`NaN`: not
/// measured) and how to show them.
struct Row {
    name: String,
    values: [f64; 3],
    show: fn(f64) -> String,
}

fn show_count(v: f64) -> String {
    format!("{v:.0}")
}

fn show_ms(v: f64) -> String {
    format!("{v:.2}")
}

fn show_mib(v: f64) -> String {
    mib(v as u64)
}

/// The comparison table: k3rs, etcd TLS, etcd http, and k3rs over each.
fn render_rows(rows: &[Row]) -> String {
    let mut out = String::from(
        "| measurement | k3rs (mTLS) | etcd 3.4 (mTLS) | etcd 3.4 (http) | k3rs / etcd mTLS | \
         k3rs / etcd http |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let [k, t, h] = r.values;
        let cell = |v: f64| {
            if v.is_nan() {
                "–".into()
            } else {
                (r.show)(v)
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.name,
            cell(k),
            cell(t),
            cell(h),
            ratio(k, t),
            ratio(k, h)
        ));
    }
    out
}

/// The `check perf` rows of one load: throughput, slowest request, stddev (ms), verdict.
fn check_perf_rows(load: &str, all: [&Report; 3]) -> (Vec<Row>, String) {
    let of = |r: &Report| r.check_perf.iter().find(|c| c.load == load).cloned();
    let got = all.map(of);
    let value = |f: fn(&CheckPerf) -> f64| got.clone().map(|c| c.as_ref().map_or(f64::NAN, f));
    let rows = vec![
        Row {
            name: format!("`check perf --load={load}`: throughput (writes/s)"),
            values: value(|c| c.throughput),
            show: show_count,
        },
        Row {
            name: format!("`check perf --load={load}`: slowest request (ms)"),
            values: value(|c| c.slowest * 1000.0),
            show: show_ms,
        },
        Row {
            name: format!("`check perf --load={load}`: stddev (ms)"),
            values: value(|c| c.stddev * 1000.0),
            show: show_ms,
        },
    ];
    let verdict = |c: &Option<CheckPerf>| match c {
        Some(c) if c.pass => "PASS",
        Some(_) => "FAIL",
        None => "–",
    };
    let verdicts = format!(
        "`check perf --load={load}`: k3rs {}, etcd mTLS {}, etcd http {}",
        verdict(&got[0]),
        verdict(&got[1]),
        verdict(&got[2])
    );
    (rows, verdicts)
}

fn table(k: &Report, t: &Report, e: &Report, secs: Duration) -> String {
    let all = [k, t, e];
    let mut rows: Vec<Row> = Vec::new();
    let mut rate = |name: &str, load: fn(&Report) -> &Load| {
        rows.push(Row {
            name: name.into(),
            values: all.map(|r| load(r).rate()),
            show: show_count,
        });
    };
    rate("put throughput, 1 client (ops/s)", |r| &r.put1);
    rate("put throughput, 64 clients (ops/s)", |r| &r.put64);
    rate("linearizable range throughput, 1 client (ops/s)", |r| {
        &r.range1
    });
    rate("linearizable range throughput, 64 clients (ops/s)", |r| {
        &r.range64
    });
    let mut lat = |name: &str, load: fn(&Report) -> &Load| {
        for (label, m) in [("p50", 500), ("p99", 990), ("p99.9", 999), ("max", 1000)] {
            rows.push(Row {
                name: format!("{name} {label} (ms)"),
                values: all.map(|r| load(r).per_mille(m)),
                show: show_ms,
            });
        }
    };
    lat("put latency, 1 client,", |r| &r.put1);
    lat("put latency, 64 clients,", |r| &r.put64);
    lat("watch event latency (put → event),", |r| &r.watch);
    let updates = all.iter().map(|r| r.churn_updates).min().unwrap_or(0);
    rows.push(Row {
        name: format!("on-disk size after {updates} updates over {KEYS} keys"),
        values: all.map(|r| r.disk_after_churn as f64),
        show: show_mib,
    });
    rows.push(Row {
        name: "on-disk size after compaction + defragment".into(),
        values: all.map(|r| r.disk_after_compact as f64),
        show: show_mib,
    });
    let mut verdicts = Vec::new();
    for load in check_perf_loads() {
        let (more, verdict) = check_perf_rows(&load, all);
        rows.extend(more);
        verdicts.push(verdict);
    }
    let mut out = render_rows(&rows);
    let live = KEYS * (key(0).len() + VALUE_LEN);
    out.push_str(&format!(
        "\nLive data: {KEYS} keys × {VALUE_LEN} B values ≈ {:.2} MiB. Churn: k3rs {} updates in \
         {:.1} s, etcd mTLS {} in {:.1} s, etcd http {} in {:.1} s (capped at {} s). Timed phases \
         run {} s each; 64 clients share 8 connections; values are {VALUE_LEN} B. \
         `etcdctl check perf` runs first, on the fresh member, 60 s per load; its verdicts \
         (PASS: ≥ 90 % of the target rate, slowest < 500 ms, stddev < 100 ms): {}.\n",
        live as f64 / (1024.0 * 1024.0),
        k.churn_updates,
        k.churn_secs,
        t.churn_updates,
        t.churn_secs,
        e.churn_updates,
        e.churn_secs,
        CHURN_CAP.as_secs(),
        secs.as_secs(),
        verdicts.join("; "),
    ));
    if !k.stages.is_empty() {
        let first = k.check_perf.first().map_or("s", |c| c.load.as_str());
        out.push_str(&format!(
            "\nk3rs' write path after `check perf --load={first}` (server-side stage histograms \
             on `/metrics`, since start; percentiles are bucket bounds):\n\n{}",
            stage_table(&k.stages)
        ));
    }
    for (name, r) in [("k3rs", k), ("etcd mTLS", t), ("etcd http", e)] {
        if r.disk_breakdown.is_empty() {
            continue;
        }
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

/// ` at <commit>` for the heading, if known.
fn commit_note() -> String {
    let c = commit();
    if c.is_empty() {
        c
    } else {
        format!(" at {c}")
    }
}

/// `check perf` on the fresh member, then the timed phases.
fn run(
    rt: &tokio::runtime::Runtime,
    ep: Endpoint,
    data_dir: PathBuf,
    is_k3rs: bool,
    secs: Duration,
) -> Report {
    let (check_perf, stages) = steady_loads(&ep, is_k3rs);
    if std::env::var("BENCH_CHECK_PERF_ONLY").is_ok_and(|v| v == "1") {
        return Report {
            check_perf,
            stages,
            ..Report::default()
        };
    }
    Report {
        check_perf,
        stages,
        ..rt.block_on(measure(ep, data_dir, secs))
    }
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

    // BENCH_ONLY=k3rs, etcd-tls or etcd measures one system (for working on the benchmark).
    // Each system runs alone, stopped before the next starts.
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let mut e = Report::default();
    if only.is_empty() || only == "etcd" {
        eprintln!("etcd 3.4, http ...");
        let etcd = Etcd::start();
        e = run(&rt, etcd.endpoint(), etcd.data_dir(), false, secs);
    }
    let mut t = Report::default();
    if only.is_empty() || only == "etcd-tls" {
        eprintln!("etcd 3.4, mTLS ...");
        let etcd = Etcd::start_tls();
        t = run(&rt, etcd.endpoint(), etcd.data_dir(), false, secs);
    }
    let mut k = Report::default();
    if only.is_empty() || only == "k3rs" {
        eprintln!("k3rs ...");
        let k3rs = K3rs::start_with(&[]);
        k = run(&rt, k3rs.endpoint(), k3rs.data_dir(), true, secs);
    }

    let text = format!(
        "k3rs vs etcd 3.4 — `cargo bench --bench etcd_compare`{}, {}; all durable (fsync per \
         commit), single member, loopback, run one after the other on the same 2 shared cores; \
         k3rs over mTLS, etcd over mTLS (client certificates required) and over plain http.\n\n{}",
        commit_note(),
        machine(),
        table(&k, &t, &e, secs)
    );
    println!("{text}");
    if !only.is_empty() {
        return;
    }
    write_result("etcd_compare", &text);
}
