//! Latency samples of a benchmark phase: throughput and percentiles.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Operations done in a time window, with per-operation latencies.
#[derive(Debug, Default, Clone)]
pub struct Load {
    pub ops: usize,
    pub secs: f64,
    pub lat: Vec<Duration>,
}

impl Load {
    /// Operations per second (NaN for a phase that never ran).
    pub fn rate(&self) -> f64 {
        if self.secs == 0.0 {
            return f64::NAN;
        }
        self.ops as f64 / self.secs
    }

    /// The `p`th percentile latency in milliseconds (NaN without samples).
    pub fn pct(&self, p: usize) -> f64 {
        self.per_mille(p * 10)
    }

    /// The latency below which `m` per mille of the samples are (999: p99.9, 1000: the
    /// slowest), in milliseconds (NaN without samples).
    pub fn per_mille(&self, m: usize) -> f64 {
        if self.lat.is_empty() {
            return f64::NAN;
        }
        let mut v = self.lat.clone();
        v.sort();
        let i = (v.len() * m / 1000).min(v.len() - 1);
        v[i].as_secs_f64() * 1000.0
    }
}

/// Runs `op(0..total)` with `concurrency` tasks pulling the next index; times each call.
pub async fn run<F, Fut>(concurrency: usize, total: usize, op: F) -> Load
where
    F: Fn(usize) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (op, next) = (op.clone(), next.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= total {
                        return lat;
                    }
                    let t = Instant::now();
                    op(n).await;
                    lat.push(t.elapsed());
                }
            })
        })
        .collect();
    let mut lat = Vec::with_capacity(total);
    for t in tasks {
        lat.extend(t.await.expect("load task"));
    }
    Load {
        ops: lat.len(),
        secs: start.elapsed().as_secs_f64(),
        lat,
    }
}

/// A size from the environment (`name`), or `default` when unset or not a number.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One `kB` line of `/proc/<pid>/status` (`VmRSS`, `RssAnon`, …) in KiB; `None` if it
/// cannot be read.
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The resident set size of process `pid` in MiB (NaN if it cannot be read).
pub fn rss_mib(pid: u32) -> f64 {
    proc_status_kib(pid, "VmRSS").map_or(f64::NAN, |kb| kb as f64 / 1024.0)
}

/// The name of process `pid` and its CPU seconds from `/proc/<pid>/stat`: user and system,
/// then those of its reaped children (`utime`, `stime`, `cutime`, `cstime`).
pub fn proc_cpu(pid: u32) -> Option<(String, [f64; 4])> {
    // /proc counts in USER_HZ, 100 on every Linux ABI k3rs builds for.
    const TICK: f64 = 100.0;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, tail) = stat.rsplit_once(')')?;
    let comm = head.split_once('(').map_or("?", |(_, c)| c).to_string();
    // Fields after the name, from state (3): utime is 14, cstime 17.
    let mut ticks = tail
        .split_whitespace()
        .skip(11)
        .map(|v| v.parse::<f64>().ok());
    let mut secs = [0.0; 4];
    for s in &mut secs {
        *s = ticks.next()?? / TICK;
    }
    Some((comm, secs))
}

/// CPU seconds (user + system, without reaped children) process `pid` has spent (NaN if it
/// cannot be read).
pub fn cpu_secs(pid: u32) -> f64 {
    proc_cpu(pid).map_or(f64::NAN, |(_, [user, system, ..])| user + system)
}

/// `ours / theirs` as `1.23×`, or `–` when either is missing.
pub fn ratio(ours: f64, theirs: f64) -> String {
    if theirs > 0.0 && ours.is_finite() && theirs.is_finite() {
        format!("{:.2}×", ours / theirs)
    } else {
        "–".into()
    }
}

/// CPUs, kernel and etcd version of this machine, for a benchmark table's heading.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let etcd = std::process::Command::new("etcd").arg("--version").output();
    let etcd = etcd
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpus} CPUs, Linux {}, {etcd}", kernel.trim())
}

/// The short hash of the checked-out commit, for a benchmark table's heading (empty if unknown).
pub fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Which build of `k3rs` a benchmark ran: the profile of the binary it started, not of the
/// benchmark itself (a debug harness started with `K3RS_BINARY=<release k3rs>` measures a
/// release server). Read from the binary's path (`…/release/…`, `…/debug/…` or `…/perf/…`), else
/// the path.
pub fn k3rs_build() -> String {
    let bin = std::path::PathBuf::from(super::k3rs_binary());
    let profile = bin
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .rev()
        .find(|c| matches!(*c, "release" | "debug" | "perf"))
        .map(|c| match c {
            "perf" => "release code without LTO (`--profile perf`)".to_string(),
            other => other.to_string(),
        });
    profile.unwrap_or_else(|| format!("`{}`", bin.display()))
}

/// Writes a benchmark's table to `$BENCH_OUT`, else `benches/results/<name>.md`.
pub fn write_result(name: &str, text: &str) {
    let out = std::env::var_os("BENCH_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/results");
            dir.join(format!("{name}.md"))
        });
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&out, text).expect("writing the result file");
    eprintln!("written to {}", out.display());
}
