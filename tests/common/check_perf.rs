//! etcd's own steady-load check, `etcdctl check perf --load=<s|m|l>` (60 s of puts of new keys
//! at a fixed rate: s = 150 writes/s from 50 clients, m = 1,000 from 200, l = 8,000 from 500),
//! against one or more endpoints; and k3rs' write-path breakdown scraped from its `/metrics`.

use std::time::Duration;

use super::etcdctl::{etcdctl_with_timeout, Endpoint};

/// What `etcdctl check perf` reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckPerf {
    /// The load profile: `s`, `m` or `l`.
    pub load: String,
    /// Writes per second it reached.
    pub throughput: f64,
    /// The slowest request (seconds).
    pub slowest: f64,
    /// The standard deviation of the request latencies (seconds).
    pub stddev: f64,
    /// Whether etcdctl said PASS (throughput ≥ 90 % of the target, slowest < 500 ms,
    /// stddev < 100 ms).
    pub pass: bool,
}

/// The `etcdctl check perf` loads to run (`$BENCH_CHECK_PERF`, comma-separated).
pub fn check_perf_loads() -> Vec<String> {
    std::env::var("BENCH_CHECK_PERF")
        .unwrap_or_else(|_| "s,m,l".into())
        .split(',')
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Runs `etcdctl check perf --load=<load>` against `eps` (one cluster), bounded by 5 min.
/// `None` if etcdctl printed no result (the output goes to stderr then).
pub fn check_perf(eps: &[Endpoint], load: &str) -> Option<CheckPerf> {
    let urls: Vec<&str> = eps.iter().map(|e| e.url.as_str()).collect();
    let all = Endpoint {
        url: urls.join(","),
        tls: eps.first().and_then(|e| e.tls.clone()),
    };
    let load_flag = format!("--load={load}");
    let out = etcdctl_with_timeout(
        &all,
        &["check", "perf", &load_flag],
        None,
        Duration::from_secs(300),
    );
    let parsed = parse(load, &out.stdout);
    if parsed.is_none() {
        eprintln!("etcdctl check perf --load={load} gave no result: {out:?}");
    }
    parsed
}

/// The figures of `check perf`'s output: `PASS: Throughput is 151 writes/s`, `PASS: Slowest
/// request took 0.011152s`, `PASS: Stddev is 0.000588s`, then `PASS` (or `FAIL: …` lines,
/// which carry the same figures, and `FAIL`).
pub fn parse(load: &str, stdout: &str) -> Option<CheckPerf> {
    let number = |line: &str| -> Option<f64> {
        line.split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .find(|w| !w.is_empty() && w.chars().any(|c| c.is_ascii_digit()))
            .and_then(|w| w.parse().ok())
    };
    let mut r = CheckPerf {
        load: load.to_string(),
        ..Default::default()
    };
    let mut seen = 0;
    for line in stdout.lines() {
        let figure = line.split_once(':').map_or(line, |(_, rest)| rest);
        let slot = if line.contains("Throughput") {
            &mut r.throughput
        } else if line.contains("Slowest request") {
            &mut r.slowest
        } else if line.contains("Stddev") {
            &mut r.stddev
        } else {
            continue;
        };
        if let Some(n) = number(figure) {
            *slot = n;
            seen += 1;
        }
    }
    r.pass = stdout.lines().any(|l| l.trim() == "PASS") && !stdout.contains("FAIL");
    (seen == 3).then_some(r)
}

/// One stage of k3rs' write path over a run: runs, median, p99 and longest (milliseconds).
#[derive(Debug, Clone, PartialEq)]
pub struct StageRow {
    pub stage: String,
    pub count: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The stage histograms of a k3rs member (`k3rs_datastore_stage_duration_seconds` and
/// `…_max_seconds` on its etcd port's `/metrics`), since it started. Stages that never ran are
/// left out. Percentiles are the upper bounds of the histogram's buckets (¹⁄₁₆ ms doubling).
pub fn k3rs_stages(ep: &Endpoint) -> Vec<StageRow> {
    let tls = ep.tls.as_ref().expect("a k3rs endpoint has TLS files");
    let client = tls.cert.as_deref().zip(tls.key.as_deref());
    let url = format!("{}/metrics", ep.url);
    let (code, body) = super::https::request("GET", &url, &tls.ca, client);
    assert_eq!(code, 200, "GET {url}: {body}");
    parse_stages(&body)
}

/// [`k3rs_stages`] from the metrics text.
pub fn parse_stages(text: &str) -> Vec<StageRow> {
    const HIST: &str = "k3rs_datastore_stage_duration_seconds_bucket{stage=\"";
    const MAX: &str = "k3rs_datastore_stage_duration_max_seconds{stage=\"";
    // Per stage: (le, cumulative count) in order, and the max.
    type Parsed = Vec<(String, Vec<(f64, u64)>, f64)>;
    fn entry(stages: &mut Parsed, name: &str) -> usize {
        match stages.iter().position(|(n, _, _)| n == name) {
            Some(i) => i,
            None => {
                stages.push((name.to_string(), Vec::new(), 0.0));
                stages.len() - 1
            }
        }
    }
    let mut stages: Parsed = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(HIST) {
            let Some((name, rest)) = rest.split_once("\",le=\"") else {
                continue;
            };
            let Some((le, count)) = rest.split_once("\"} ") else {
                continue;
            };
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap_or(f64::INFINITY)
            };
            let i = entry(&mut stages, name);
            stages[i].1.push((le, count.trim().parse().unwrap_or(0)));
        } else if let Some(rest) = line.strip_prefix(MAX) {
            if let Some((name, v)) = rest.split_once("\"} ") {
                let i = entry(&mut stages, name);
                stages[i].2 = v.trim().parse().unwrap_or(0.0);
            }
        }
    }
    stages
        .into_iter()
        .filter_map(|(stage, buckets, max)| {
            let count = buckets.last().map_or(0, |b| b.1);
            if count == 0 {
                return None;
            }
            let q = |q: f64| {
                let rank = (q * count as f64).ceil().max(1.0) as u64;
                let le = buckets.iter().find(|b| b.1 >= rank).map_or(max, |b| b.0);
                le.min(max) * 1000.0
            };
            Some(StageRow {
                stage,
                count,
                p50_ms: q(0.5),
                p99_ms: q(0.99),
                max_ms: max * 1000.0,
            })
        })
        .collect()
}

/// The breakdown as a markdown table.
pub fn stage_table(rows: &[StageRow]) -> String {
    let mut out = String::from(
        "| stage | runs | p50 (ms) | p99 (ms) | max (ms) |\n|---|---:|---:|---:|---:|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | ≤ {:.2} | ≤ {:.2} | {:.2} |\n",
            r.stage, r.count, r.p50_ms, r.p99_ms, r.max_ms
        ));
    }
    out
}
