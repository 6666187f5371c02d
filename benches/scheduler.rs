//! Scheduler benchmark, kubemark style: the real `k3rs server` (its scheduler and controller
//! manager running, no embedded agent) and N hollow nodes from one real
//! `k3rs agent --hollow N` (Lease heartbeats every 10 s, bound pods marked Running), then M
//! pods (100m CPU, 100 MiB each) created by 64 concurrent clients. Prints the nodes, pods,
//! scheduling throughput (pods/s, first create → last binding seen in a pod watch), the
//! pod-scheduled latency p50/p99 both as the API records it (`creationTimestamp` →
//! `PodScheduled` condition, whole seconds) and as a client sees it (create sent → binding
//! seen in the watch, ms), the server's and the agent's RSS, and the CPU seconds each spent
//! from the first create to all Ready (and per pod: steadier across runs than pods/s on a
//! shared machine), beside kube-scheduler's published 680–810 pods/s at 5,000 nodes. A second
//! table counts the API writes the run cost (successful POST/PUT/PATCH/DELETE from the server's
//! `apiserver_request_total`, first create to all Ready), by verb and resource and per pod.
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
//! `BENCH_OUT=<file>` also writes the table there. `BENCH_LOG_DIR=<dir>` keeps the server's
//! and the hollow agent's logs there (`server.log`, `agent.log`), whether the run completes or
//! not; the server logs at `K3RS_LOG` when set, the agent at `BENCH_AGENT_LOG` (default `warn`).
//! `BENCH_TIMEOUT_FACTOR=<n>` multiplies every deadline (nodes Ready, pods bound, pods Ready) by
//! `n`, for a loaded machine. `BENCH_LEASE_SECS=<s>` (default 10, the kubelet's) sets how often
//! each hollow node renews its Lease, and the node monitor grace period to 4 times that (the
//! kubelet's 10 s against 40 s): 5,000 nodes at 10 s are 500 Lease writes a second before any
//! pod, more than a debug server on a loaded machine sustains. Every 10 s a progress line
//! (pods bound and Ready, both processes' RSS, the load average) goes to stderr, so a stall
//! shows when it began. The server runs with `--cluster-cidr 10.128.0.0/9`, room for every
//! node's `/24`.
//!
//! A run completes when every pod is bound (throughput and latencies count to the last
//! binding) and then every pod is Ready at once (through a Deployment: and the Deployment
//! reports all replicas available); the table gives the time from the first create to that
//! point as well.

// A benchmark: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kube::{KubeClient, Kubeconfig, WatchLines};
use common::process::ChildGuard;
use common::stats::{self, cpu_secs, env_usize, proc_status_kib, rss_mib};
use common::K3rs;
use serde_json::{json, Value};

const CONCURRENCY: usize = 64;
const CONNS: usize = 4;
const NODE_PREFIX: &str = "bench-";
/// The pod network: room for 32,768 nodes' `/24`s (the default `10.42.0.0/16` holds 256, and
/// the node IPAM controller would retry every node beyond them on each of its updates), apart
/// from the default service network `10.43.0.0/16`.
const CLUSTER_CIDR: &str = "10.128.0.0/9";

/// `secs` times `BENCH_TIMEOUT_FACTOR` (default 1).
fn scaled(secs: u64) -> Duration {
    Duration::from_secs(secs * env_usize("BENCH_TIMEOUT_FACTOR", 1) as u64)
}

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

/// `BENCH_LEASE_SECS`: how often a hollow node renews its Lease, seconds.
fn lease_secs() -> usize {
    env_usize("BENCH_LEASE_SECS", 10)
}

fn start_agent(kubeconfig: &Path, nodes: usize, dir: &Path) -> ChildGuard {
    let mut cmd = Command::new(common::k3rs_binary());
    cmd.arg("agent")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--hollow", &nodes.to_string()])
        .args(["--hollow-name-prefix", NODE_PREFIX])
        .args(["--node-lease-renew-interval", &format!("{}s", lease_secs())])
        .env(
            "K3RS_LOG",
            std::env::var("BENCH_AGENT_LOG").unwrap_or_else(|_| "warn".to_string()),
        );
    ChildGuard::spawn("k3rs agent", cmd, &dir.join("agent.log"))
}

/// Waits until `want` nodes are Ready: lists them 500 at a time, once a second per 1,000
/// nodes (an unpaged list of 5,000 nodes every second was itself a load on the server while
/// the nodes joined; the time to Ready is therefore up to `want / 1000` s late).
async fn wait_nodes_ready(c: &KubeClient, want: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + scaled(60 + want as u64 / 10);
    let period = Duration::from_secs((want as u64 / 1000).max(1));
    loop {
        let nodes = list_all(c, "/api/v1/nodes").await?;
        let ready = nodes.iter().filter(|n| is_ready(n)).count();
        if ready >= want {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!("only {ready} of {want} hollow nodes Ready after the deadline");
        }
        tokio::time::sleep(period).await;
    }
}

/// What the benchmark's pod watch has seen so far.
#[derive(Default)]
struct Seen {
    /// First time each pod was seen bound.
    bound: HashMap<String, Instant>,
    /// Pods whose latest event has `Ready=True`.
    ready: HashSet<String>,
    /// When every pod was Ready at once, first.
    all_ready: Option<Instant>,
    /// Why the watch ended, if it did.
    ended: Option<String>,
}

/// Whether a pod or a node has `Ready=True`.
fn is_ready(obj: &Value) -> bool {
    obj["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// Follows the pod watch into `seen` until it ends.
async fn follow(mut watch: WatchLines, seen: Arc<Mutex<Seen>>, pods: usize) {
    let end = loop {
        let ev = match watch.next().await {
            Ok(Some(ev)) => ev,
            Ok(None) => break "the server ended the watch".to_string(),
            Err(e) => break format!("{e:#}"),
        };
        let obj = &ev["object"];
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        let mut s = seen.lock().unwrap();
        if ev["type"] == "DELETED" {
            s.ready.remove(&name);
            continue;
        }
        if obj["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
        {
            s.bound.entry(name.clone()).or_insert_with(Instant::now);
        }
        if is_ready(obj) {
            s.ready.insert(name);
        } else {
            s.ready.remove(&name);
        }
        if s.ready.len() >= pods && s.all_ready.is_none() {
            s.all_ready = Some(Instant::now());
        }
    };
    seen.lock().unwrap().ended = Some(end);
}

/// The load average over the last minute (NaN if unknown).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Waits until `done` holds of what the watch has seen, printing progress every 10 s; fails
/// with `what` at `deadline` or when the watch ends.
async fn wait_seen(
    seen: &Mutex<Seen>,
    pids: (Option<u32>, Option<u32>),
    start: Instant,
    deadline: Duration,
    what: &str,
    pods: usize,
    done: impl Fn(&Seen) -> bool,
) -> anyhow::Result<()> {
    let mut next_report = Instant::now();
    loop {
        let (finished, bound, ready, ended) = {
            let s = seen.lock().unwrap();
            (done(&s), s.bound.len(), s.ready.len(), s.ended.clone())
        };
        if Instant::now() >= next_report || finished {
            next_report += Duration::from_secs(10);
            eprintln!(
                "[{:>6.0} s] bound {bound}/{pods}, Ready {ready}/{pods}, server RSS {:.0} MiB, \
                 agent RSS {:.0} MiB, load {:.1}",
                start.elapsed().as_secs_f64(),
                pids.0.map_or(f64::NAN, rss_mib),
                pids.1.map_or(f64::NAN, rss_mib),
                load_average(),
            );
        }
        if finished {
            return Ok(());
        }
        if let Some(why) = ended {
            anyhow::bail!("{what}: the pod watch ended ({why}); {bound} bound, {ready} Ready");
        }
        if start.elapsed() > deadline {
            anyhow::bail!(
                "{what} not within {deadline:?} of the first create: {bound} of {pods} bound, \
                 {ready} Ready"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every item of the list at `path`, 500 at a time as informers list (one unpaged list of
/// 10,000 pods raises a debug server's RSS by about 900 MiB, which would hide the workload's).
async fn list_all(c: &KubeClient, path: &str) -> anyhow::Result<Vec<Value>> {
    let mut items = Vec::new();
    let mut cont = String::new();
    loop {
        let page = c
            .ok("GET", &format!("{path}?limit=500&continue={cont}"), None)
            .await?;
        items.extend(page["items"].as_array().into_iter().flatten().cloned());
        match page["metadata"]["continue"].as_str() {
            Some(next) if !next.is_empty() => cont = next.to_string(),
            _ => return Ok(items),
        }
    }
}

/// Waits until the Deployment reports `replicas` available (it lags its pods' readiness by
/// the ReplicaSet controller's next sync).
async fn wait_deployment_available(c: &KubeClient, replicas: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + scaled(120);
    loop {
        let d = c
            .ok(
                "GET",
                "/apis/apps/v1/namespaces/default/deployments/bench",
                None,
            )
            .await?;
        let available = d["status"]["availableReplicas"].as_u64().unwrap_or(0);
        if available as usize >= replicas {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "the Deployment reports {available} of {replicas} available well after all \
                 its pods were Ready: {}",
                d["status"]
            );
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
    /// First create → every pod Ready (and, via a Deployment, all replicas available).
    completed_secs: f64,
    server_rss_mib: f64,
    /// The server's peak RSS (`VmHWM`).
    server_peak_mib: f64,
    agent_rss_mib: f64,
    /// CPU seconds from the first create to all Ready.
    server_cpu_secs: f64,
    agent_cpu_secs: f64,
    load_average: f64,
    /// API writes from the first create to all Ready: verb, resource, count.
    writes: Vec<(String, String, u64)>,
}

/// Successful writes (POST, PUT, PATCH, DELETE answered 2xx) the server has counted so far,
/// by verb and resource, from its `/metrics` (`apiserver_request_total`).
async fn writes(c: &KubeClient) -> anyhow::Result<BTreeMap<(String, String), u64>> {
    let (code, _, text) = c.request_with_headers("GET", "/metrics", None).await?;
    anyhow::ensure!(code == 200, "GET /metrics: {code} {text}");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, n)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(&format!("{name}=\""))
                .nth(1)
                .and_then(|v| v.split('"').next())
                .unwrap_or_default()
                .to_string()
        };
        let verb = label("verb");
        if !["POST", "PUT", "PATCH", "DELETE"].contains(&verb.as_str())
            || !label("code").starts_with('2')
        {
            continue;
        }
        let n: u64 = n.trim().parse().unwrap_or(0);
        *out.entry((verb, label("resource"))).or_default() += n;
    }
    Ok(out)
}

/// `after - before`, largest first.
fn writes_between(
    before: &BTreeMap<(String, String), u64>,
    after: BTreeMap<(String, String), u64>,
) -> Vec<(String, String, u64)> {
    let mut v: Vec<_> = after
        .into_iter()
        .map(|(k, n)| {
            let d = n.saturating_sub(before.get(&k).copied().unwrap_or(0));
            (k.0, k.1, d)
        })
        .filter(|w| w.2 > 0)
        .collect();
    v.sort_by_key(|w| std::cmp::Reverse(w.2));
    v
}

/// The peak resident set size of process `pid` in MiB (NaN if it cannot be read).
fn peak_rss_mib(pid: u32) -> f64 {
    proc_status_kib(pid, "VmHWM").map_or(f64::NAN, |kb| kb as f64 / 1024.0)
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

    // Watch pods from now on (for longer than the server's 30-minute default); note when
    // each pod's binding shows up and which pods are Ready.
    let list = clients[0].ok("GET", "/api/v1/pods?limit=1", None).await?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let watch = clients[0]
        .watch(&format!(
            "/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=86400"
        ))
        .await?;
    let watcher = tokio::spawn(follow(watch, seen.clone(), pods));

    let cpu = |pid: Option<u32>| pid.map_or(f64::NAN, cpu_secs);
    let cpu_before = (cpu(server.pid()), cpu(agent.pid()));
    let writes_before = writes(&clients[0]).await?;
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
    let pids = (server.pid(), agent.pid());
    let bind_deadline = scaled(120 + pods as u64 / 20);
    wait_seen(
        &seen,
        pids,
        start,
        bind_deadline,
        "all pods bound",
        pods,
        |s| s.bound.len() >= pods,
    )
    .await?;
    let bound = seen.lock().unwrap().bound.clone();
    let ready_deadline = bind_deadline + scaled(120 + pods as u64 / 50);
    wait_seen(
        &seen,
        pids,
        start,
        ready_deadline,
        "all pods Ready",
        pods,
        |s| s.all_ready.is_some(),
    )
    .await?;
    if via == Via::Deployment {
        wait_deployment_available(&clients[0], pods).await?;
    }
    let completed_secs = start.elapsed().as_secs_f64();
    let server_cpu_secs = cpu(server.pid()) - cpu_before.0;
    let agent_cpu_secs = cpu(agent.pid()) - cpu_before.1;
    let writes = writes_between(&writes_before, writes(&clients[0]).await?);
    watcher.abort();
    let sent = sent.lock().unwrap().clone();
    let last = bound.values().max().copied().unwrap_or(start);
    let mut latencies: Vec<Duration> = match via {
        Via::Pods => sent
            .iter()
            .filter_map(|(name, s)| bound.get(name).map(|b| b.saturating_duration_since(*s)))
            .collect(),
        Via::Deployment => bound
            .values()
            .map(|b| b.saturating_duration_since(start))
            .collect(),
    };
    latencies.sort();
    let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0);

    // Memory as the workload left it, before this client's own list below.
    let server_rss_mib = server.pid().map_or(f64::NAN, rss_mib);
    let server_peak_mib = server.pid().map_or(f64::NAN, peak_rss_mib);
    let agent_rss_mib = agent.pid().map_or(f64::NAN, rss_mib);

    let mut recorded: Vec<i64> = Vec::new();
    for pod in list_all(&clients[0], "/api/v1/namespaces/default/pods").await? {
        recorded.extend(recorded_latency(&pod));
    }
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
        seen_p50_ms: ms(pct(&latencies, 50)),
        seen_p99_ms: ms(pct(&latencies, 99)),
        recorded_p50_s: pct(&recorded, 50).unwrap_or(-1),
        recorded_p99_s: pct(&recorded, 99).unwrap_or(-1),
        completed_secs,
        server_rss_mib,
        server_peak_mib,
        agent_rss_mib,
        server_cpu_secs,
        agent_cpu_secs,
        load_average: load_average(),
        writes,
    })
}

fn table(r: &Report) -> String {
    let build = stats::k3rs_build();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let (lease, grace) = (lease_secs(), 4 * lease_secs());
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
    let total: u64 = r.writes.iter().map(|w| w.2).sum();
    let per_pod = |n: u64| n as f64 / r.pods.max(1) as f64;
    let mut writes = format!(
        "\nAPI writes from the first create to all Ready: {total} ({:.2} per pod).\n\n\
         | verb | resource | writes | per pod |\n|---|---|---:|---:|\n",
        per_pod(total)
    );
    for (verb, resource, n) in &r.writes {
        writes.push_str(&format!(
            "| {verb} | {resource} | {n} | {:.2} |\n",
            per_pod(*n)
        ));
    }
    format!(
        "## Scheduler benchmark ({build} build)\n\n\
         `cargo bench --bench scheduler -- --nodes {} --pods {}{flag}`: one `k3rs server` \
         (scheduler and controller manager in-process) and one `k3rs agent --hollow {}` on \
         loopback, {cores} CPU cores shared by the server, the agent and the client; hollow \
         nodes renewing their Leases every {lease} s (node monitor grace period {grace} s), \
         ready {:.1} s after start; {created}.\n\n\
         | nodes | pods | scheduled pods/s | p50 / p99 created → PodScheduled (API, 1 s steps) \
         | p50 / p99 {client_view} → binding seen | all Ready | server RSS (peak) | agent RSS \
         | server / agent CPU s (ms per pod) |\n\
         |---:|---:|---:|---|---|---:|---:|---:|---:|\n\
         | {} | {} | {:.0} | {} s / {} s | {:.0} ms / {:.0} ms | {:.0} s | {:.0} MiB ({:.0} MiB) \
         | {:.0} MiB | {:.0} / {:.0} ({:.1} / {:.1}) |\n\
         | kube-scheduler, published (5,000 nodes) | | 680–810 | | | | | | |\n\
         | goal (issue 23) | 5,000 nodes, 30k pods | ≥ 1,000 | p99 ≤ 5 s | | | ≤ 2 GiB \
         (≤ 1 GiB at 1,000 / 10,000) | | |\n\n\
         Load average (1 min) at the end: {:.1}.\n{writes}",
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
        r.completed_secs,
        r.server_rss_mib,
        r.server_peak_mib,
        r.agent_rss_mib,
        r.server_cpu_secs,
        r.agent_cpu_secs,
        r.server_cpu_secs * 1000.0 / r.pods as f64,
        r.agent_cpu_secs * 1000.0 / r.pods as f64,
        r.load_average,
    )
}

fn main() {
    let (nodes, pods, via) = sizes();
    let started = Instant::now();
    let grace = format!("node-monitor-grace-period={}s", 4 * lease_secs());
    let server = K3rs::start_kubernetes(&[
        "--disable-agent",
        "--cluster-cidr",
        CLUSTER_CIDR,
        "--kube-controller-manager-arg",
        &grace,
    ]);
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
    let report = rt.block_on(run(&server, &agent, started, nodes, pods, via));
    if let Some(keep) = std::env::var_os("BENCH_LOG_DIR") {
        let keep = Path::new(&keep);
        std::fs::create_dir_all(keep).expect("create BENCH_LOG_DIR");
        std::fs::copy(server.log_path(), keep.join("server.log")).expect("keep server log");
        std::fs::copy(agent.log_path(), keep.join("agent.log")).expect("keep agent log");
        eprintln!("logs kept in {}", keep.display());
    }
    let report = report.unwrap_or_else(|e| {
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
