//! Scheduler benchmark, kubemark style: the real `k3rs server` (its scheduler and controller
//! manager running, no embedded agent) and N hollow nodes from one real
//! `k3rs agent --hollow N` (Lease heartbeats every 10 s, bound pods marked Running), then M
//! pods (100m CPU, 100 MiB each) created by 64 concurrent clients. Prints the nodes, pods,
//! scheduling throughput (pods/s, first create → last binding seen in a pod watch), the
//! pod-scheduled latency p50/p99 both as the API records it (`creationTimestamp` →
//! `PodScheduled` condition, whole seconds) and as a client sees it (create sent → binding
//! seen in the watch, ms), and the server's and the agent's RSS, beside kube-scheduler's
//! published 680–810 pods/s at 5,000 nodes.
//!
//! Sizes: `--nodes N --pods M` (after `--`) or `BENCH_NODES`/`BENCH_PODS`; the default,
//! 100 nodes and 1,000 pods, finishes in a few minutes in a debug build. `--via deployment`
//! (or `BENCH_VIA=deployment`) creates one Deployment of M replicas instead, as users do (the
//! ReplicaSet controller creates the pods; the client view then counts from the Deployment's
//! creation). `K3RS_BINARY=<path>` runs another `k3rs` build (before/after comparisons):
//!
//! ```text
//! cargo bench --bench scheduler                                    # 100 / 1,000 (release)
//! cargo bench --bench scheduler -- --nodes 1000 --pods 10000
//! cargo bench --bench scheduler -- --nodes 5000 --pods 30000
//! cargo bench --bench scheduler -- --nodes 1000 --pods 10000 --via deployment
//! cargo build && target/debug/deps/scheduler-<hash> --nodes 100    # debug
//! ```
//!
//! `BENCH_OUT=<file>` also writes the table there.

// A benchmark: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kube::{KubeClient, Kubeconfig};
use common::process::ChildGuard;
use common::stats::{self, env_usize, rss_mib};
use common::K3rs;
use serde_json::{json, Value};

const CONCURRENCY: usize = 64;
const CONNS: usize = 4;
const NODE_PREFIX: &str = "bench-";

/// Who creates the pods.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// The benchmark's clients, one POST per pod.
    Pods,
    /// One Deployment; its ReplicaSet controller creates the pods.
    Deployment,
}

/// Nodes, pods and who creates them, from `--nodes`/`--pods`/`--via` or the environment
/// (other arguments, such as the `--bench` cargo passes, are ignored).
fn sizes() -> (usize, usize, Via) {
    let mut nodes = env_usize("BENCH_NODES", 100);
    let mut pods = env_usize("BENCH_PODS", 1_000);
    let mut via = std::env::var("BENCH_VIA").unwrap_or_default();
    let args: Vec<String> = std::env::args().collect();
    for w in args.windows(2) {
        let n = w[1].parse().ok();
        match (w[0].as_str(), n) {
            ("--nodes", Some(n)) => nodes = n,
            ("--pods", Some(n)) => pods = n,
            ("--via", _) => via = w[1].clone(),
            _ => {}
        }
    }
    let via = match via.as_str() {
        "" | "pods" => Via::Pods,
        "deployment" => Via::Deployment,
        other => panic!("--via {other:?}: expected pods or deployment"),
    };
    (nodes, pods, via)
}

fn pod_spec() -> Value {
    json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]})
}

fn pod(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:06}"), "namespace": "default"},
        "spec": pod_spec()})
}

fn deployment(replicas: usize) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "bench"}},
            "template": {"metadata": {"labels": {"app": "bench"}}, "spec": pod_spec()}}})
}

/// Seconds since the epoch of an RFC 3339 UTC time with whole seconds
/// (`2026-11-21T19:05:01Z`, as the API writes `creationTimestamp`).
fn epoch_secs(t: &str) -> Option<i64> {
    let num = |r: std::ops::Range<usize>| t.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    // Days from the civil date (proleptic Gregorian), as in H. Hinnant's algorithm.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// `creationTimestamp` → `PodScheduled=True`'s `lastTransitionTime` of a bound pod, seconds.
fn recorded_latency(pod: &Value) -> Option<i64> {
    let created = epoch_secs(pod["metadata"]["creationTimestamp"].as_str()?)?;
    let scheduled = pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled" && c["status"] == "True")?;
    Some(epoch_secs(scheduled["lastTransitionTime"].as_str()?)? - created)
}

/// The `p`th percentile of sorted `v`.
fn pct<T: Copy>(v: &[T], p: usize) -> Option<T> {
    (!v.is_empty()).then(|| v[(v.len() * p / 100).min(v.len() - 1)])
}

fn start_agent(kubeconfig: &Path, nodes: usize, dir: &Path) -> ChildGuard {
    let mut cmd = Command::new(common::k3rs_binary());
    cmd.arg("agent")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--hollow", &nodes.to_string()])
        .args(["--hollow-name-prefix", NODE_PREFIX])
        .env("K3RS_LOG", "warn");
    ChildGuard::spawn("k3rs agent", cmd, &dir.join("agent.log"))
}

/// Waits until `want` nodes are Ready.
async fn wait_nodes_ready(c: &KubeClient, want: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60 + want as u64 / 10);
    loop {
        let list = c.ok("GET", "/api/v1/nodes", None).await?;
        let ready = list["items"].as_array().map_or(0, |items| {
            items
                .iter()
                .filter(|n| {
                    n["status"]["conditions"].as_array().is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
                })
                .count()
        });
        if ready >= want {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!("only {ready} of {want} hollow nodes Ready after the deadline");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

struct Report {
    nodes: usize,
    pods: usize,
    via: Via,
    nodes_ready_secs: f64,
    create_rate: f64,
    pods_per_sec: f64,
    /// Client view: create sent → binding seen, ms.
    seen_p50_ms: f64,
    seen_p99_ms: f64,
    /// API view: creationTimestamp → PodScheduled, whole seconds.
    recorded_p50_s: i64,
    recorded_p99_s: i64,
    server_rss_mib: f64,
    agent_rss_mib: f64,
}

async fn run(
    server: &K3rs,
    agent: &ChildGuard,
    started: Instant,
    nodes: usize,
    pods: usize,
    via: Via,
) -> anyhow::Result<Report> {
    let cfg = Kubeconfig::read(&server.kubeconfig())?;
    let mut clients = Vec::new();
    for _ in 0..CONNS {
        clients.push(KubeClient::connect(&cfg).await?);
    }
    let clients = Arc::new(clients);
    wait_nodes_ready(&clients[0], nodes).await?;
    let nodes_ready_secs = started.elapsed().as_secs_f64();

    // Watch pods from now on; note when each pod's binding shows up.
    let list = clients[0].ok("GET", "/api/v1/pods?limit=1", None).await?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let bound: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let mut watch = clients[0]
        .watch(&format!("/api/v1/pods?watch=1&resourceVersion={rv}"))
        .await?;
    let watcher = {
        let bound = bound.clone();
        tokio::spawn(async move {
            while let Ok(Some(ev)) = watch.next().await {
                let obj = &ev["object"];
                if obj["spec"]["nodeName"]
                    .as_str()
                    .is_some_and(|n| !n.is_empty())
                {
                    let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
                    let mut b = bound.lock().unwrap();
                    b.entry(name).or_insert_with(Instant::now);
                    if b.len() >= pods {
                        return true;
                    }
                }
            }
            false
        })
    };

    let start = Instant::now();
    let create_rate = match via {
        Via::Pods => {
            let (cs, sn) = (clients.clone(), sent.clone());
            let load = stats::run(CONCURRENCY, pods, move |i| {
                let (c, sn) = (cs[i % CONNS].clone(), sn.clone());
                async move {
                    sn.lock()
                        .unwrap()
                        .insert(format!("pod-{i:06}"), Instant::now());
                    c.ok("POST", "/api/v1/namespaces/default/pods", Some(&pod(i)))
                        .await
                        .expect("create pod");
                }
            })
            .await;
            load.rate()
        }
        Via::Deployment => {
            clients[0]
                .ok(
                    "POST",
                    "/apis/apps/v1/namespaces/default/deployments",
                    Some(&deployment(pods)),
                )
                .await?;
            f64::NAN
        }
    };
    let deadline = Duration::from_secs(120 + pods as u64 / 20);
    match tokio::time::timeout(deadline, watcher).await {
        Ok(Ok(true)) => {}
        _ => anyhow::bail!(
            "only {} of {pods} pods bound within {deadline:?} (or the watch ended)",
            bound.lock().unwrap().len()
        ),
    }
    let bound = bound.lock().unwrap().clone();
    let sent = sent.lock().unwrap().clone();
    let last = bound.values().max().copied().unwrap_or(start);
    let mut seen: Vec<Duration> = match via {
        Via::Pods => sent
            .iter()
            .filter_map(|(name, s)| bound.get(name).map(|b| b.saturating_duration_since(*s)))
            .collect(),
        Via::Deployment => bound
            .values()
            .map(|b| b.saturating_duration_since(start))
            .collect(),
    };
    seen.sort();
    let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0);

    let all = clients[0]
        .ok("GET", "/api/v1/namespaces/default/pods", None)
        .await?;
    let mut recorded: Vec<i64> = all["items"]
        .as_array()
        .map(|items| items.iter().filter_map(recorded_latency).collect())
        .unwrap_or_default();
    anyhow::ensure!(
        recorded.len() == pods,
        "{} of {pods} pods carry PodScheduled=True with a transition time",
        recorded.len()
    );
    recorded.sort();
    Ok(Report {
        nodes,
        pods,
        via,
        nodes_ready_secs,
        create_rate,
        pods_per_sec: pods as f64 / last.duration_since(start).as_secs_f64().max(1e-9),
        seen_p50_ms: ms(pct(&seen, 50)),
        seen_p99_ms: ms(pct(&seen, 99)),
        recorded_p50_s: pct(&recorded, 50).unwrap_or(-1),
        recorded_p99_s: pct(&recorded, 99).unwrap_or(-1),
        server_rss_mib: server.pid().map_or(f64::NAN, rss_mib),
        agent_rss_mib: agent.pid().map_or(f64::NAN, rss_mib),
    })
}

fn table(r: &Report) -> String {
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let (flag, created, client_view) = match r.via {
        Via::Pods => (
            "",
            format!(
                "pods (100m CPU, 100 MiB) created by {CONCURRENCY} concurrent clients at {:.0}/s",
                r.create_rate
            ),
            "create sent",
        ),
        Via::Deployment => (
            " --via deployment",
            "one Deployment of them (100m CPU, 100 MiB each), the ReplicaSet controller \
             creating the pods"
                .to_string(),
            "Deployment created",
        ),
    };
    format!(
        "## Scheduler benchmark ({build} build)\n\n\
         `cargo bench --bench scheduler -- --nodes {} --pods {}{flag}`: one `k3rs server` \
         (scheduler and controller manager in-process) and one `k3rs agent --hollow {}` on \
         loopback, {cores} CPU cores shared by the server, the agent and the client; hollow \
         nodes ready {:.1} s after start; {created}.\n\n\
         | nodes | pods | scheduled pods/s | p50 / p99 created → PodScheduled (API, 1 s steps) \
         | p50 / p99 {client_view} → binding seen | server RSS | agent RSS |\n\
         |---:|---:|---:|---|---|---:|---:|\n\
         | {} | {} | {:.0} | {} s / {} s | {:.0} ms / {:.0} ms | {:.0} MiB | {:.0} MiB |\n\
         | kube-scheduler, published (5,000 nodes) | | 680–810 | | | | |\n\
         | goal (issue 23) | 5,000 nodes, 30k pods | ≥ 1,000 | p99 ≤ 5 s | | ≤ 2 GiB \
         (≤ 1 GiB at 1,000 / 10,000) | |\n",
        r.nodes,
        r.pods,
        r.nodes,
        r.nodes_ready_secs,
        r.nodes,
        r.pods,
        r.pods_per_sec,
        r.recorded_p50_s,
        r.recorded_p99_s,
        r.seen_p50_ms,
        r.seen_p99_ms,
        r.server_rss_mib,
        r.agent_rss_mib,
    )
}

fn main() {
    let (nodes, pods, via) = sizes();
    let started = Instant::now();
    let server = K3rs::start_kubernetes(&["--disable-agent"]);
    let dir = tempfile::Builder::new()
        .prefix("k3rs-bench-")
        .tempdir()
        .expect("tempdir");
    let agent = start_agent(&server.kubeconfig(), nodes, dir.path());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let report = rt
        .block_on(run(&server, &agent, started, nodes, pods, via))
        .unwrap_or_else(|e| {
            panic!(
                "benchmark: {e:#}\nserver log tail:\n{}",
                common::log_tail(&server.log_path(), 30)
            )
        });
    let out = table(&report);
    println!("{out}");
    if let Some(path) = std::env::var_os("BENCH_OUT") {
        std::fs::write(&path, &out).expect("write results");
        eprintln!("wrote {}", Path::new(&path).display());
    }
}
