//! The node agent end to end: a real `k3rs server` (embedded agent, node gw-a) in a network
//! namespace and a real `k3rs agent` (node gw-b) joined by token in a second one, over a veth
//! (`tests/common/two_node_lab.rs`), with containerd, runc and CNI. Measures
//! - the time from spawning `k3rs server` on a fresh data dir to its node's Ready condition,
//!   and from spawning `k3rs agent` (fresh data dir, TLS bootstrap) to its node's Ready, both
//!   as seen through a watch on nodes (an upper bound: the watch opens once the API answers;
//!   the agent, like the embedded one, reports Ready once containerd runs and its pod network
//!   is configured, while the image tarballs in its data dir import in the background; the
//!   agent joins the server just after it was restarted by SIGKILL to load the test images);
//! - the resident memory at idle (both nodes Ready, no pods, after `BENCH_SETTLE` seconds) of
//!   the server process (API server, datastore, controllers, scheduler and the embedded
//!   agent), of the separate agent process, and of each one's containerd;
//! - pod startup latency, pod created (the create call starts) → Ready seen via a watch, for
//!   `BENCH_PODS` (100) busybox pods on the server's node, created by `BENCH_CONCURRENCY` (10)
//!   clients; image already imported, like the SLO's "excluding image pulls".
//!
//! Prints a markdown table next to k3s's published figures and the Kubernetes pod startup
//! SLO, and writes it to `benches/results/agent.md` (or `$BENCH_OUT`).
//!
//! Run (as root): `cargo bench --bench agent`.

// A benchmark: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kube::{KubeClient, Kubeconfig};
use common::stats::{self, env_usize, rss_mib, Load};
use common::two_node_lab::{add_images, TwoNodeLab, A, B};
use common::K3rs;
use serde_json::{json, Value};

/// k3s's published minimum RAM (K3s v1.26.5, embedded etcd, Intel 8375C).
const K3S_PROFILE: &str = "https://docs.k3s.io/reference/resource-profiling";
const K3S_CLUSTER_MB: f64 = 1450.0;
const K3S_AGENT_MB: f64 = 275.0;

#[derive(Debug, Default)]
struct Report {
    server_ready: Duration,
    agent_ready: Duration,
    server_rss: f64,
    server_containerd_rss: f64,
    agent_rss: f64,
    agent_containerd_rss: f64,
    /// `RssAnon` and `RssFile` (MiB) of the server and of the agent at idle.
    server_split: (f64, f64),
    agent_split: (f64, f64),
    server_rss_loaded: f64,
    server_containerd_loaded: f64,
    pods: usize,
    concurrency: usize,
    startup: Load,
    all_ready: Duration,
}

fn ready_condition(obj: &Value) -> bool {
    obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Watches nodes until `node` is Ready; returns when that was seen.
async fn node_ready(client: &KubeClient, node: &str) -> Instant {
    let mut w = client
        .watch("/api/v1/nodes?watch=1")
        .await
        .expect("watch nodes");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let ev = tokio::time::timeout_at(deadline, w.next())
            .await
            .unwrap_or_else(|_| panic!("node {node} not Ready within 180 s"))
            .expect("node watch")
            .unwrap_or_else(|| panic!("the node watch ended before {node} was Ready"));
        let obj = &ev["object"];
        if obj["metadata"]["name"] == node && ready_condition(obj) {
            return Instant::now();
        }
    }
}

async fn connect(server: &K3rs) -> KubeClient {
    let cfg = Kubeconfig::read(&server.kubeconfig()).expect("kubeconfig");
    KubeClient::connect(&cfg).await.expect("connect")
}

/// The PID of the `containerd` whose parent is `parent`.
fn containerd_of(parent: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let (head, tail) = stat.rsplit_once(')')?;
        let comm = head.split_once('(')?.1;
        let ppid: u32 = tail.split_whitespace().nth(1)?.parse().ok()?;
        (comm == "containerd" && ppid == parent).then_some(pid)
    })
}

fn rss_of(pid: Option<u32>) -> f64 {
    pid.map_or(f64::NAN, rss_mib)
}

/// A process's anonymous and file-backed resident pages (`RssAnon`, `RssFile`) in MiB: what
/// it allocated (heap, stacks, relocated data) and what it maps of its binary and libraries.
fn rss_split(pid: Option<u32>) -> (f64, f64) {
    let field = |name| {
        pid.and_then(|p| stats::proc_status_kib(p, name))
            .map_or(f64::NAN, |kib| kib as f64 / 1024.0)
    };
    (field("RssAnon"), field("RssFile"))
}

/// `86.3 MiB (anonymous 19.0, file 67.3)`.
fn mib_split(rss: f64, (anon, file): (f64, f64)) -> String {
    format!("{} (anonymous {anon:.1}, file {file:.1})", mib(rss))
}

fn bench_pod(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("bench-{i}"), "labels": {"app": "bench"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": A},
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "sleep", "image": "docker.io/library/busybox:1.35",
                "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"]}]}})
}

/// Creates the pods at bounded concurrency while a watch records when each turns Ready.
async fn pod_startup(client: KubeClient, pods: usize, concurrency: usize) -> (Load, Duration) {
    let list = client
        .ok(
            "GET",
            "/api/v1/namespaces/default/pods?labelSelector=app%3Dbench",
            None,
        )
        .await
        .expect("list pods");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("list resourceVersion")
        .to_string();
    let mut w = client
        .watch(&format!(
            "/api/v1/namespaces/default/pods?watch=1&labelSelector=app%3Dbench&resourceVersion={rv}"
        ))
        .await
        .expect("watch pods");
    let watcher = tokio::spawn(async move {
        let mut ready: HashMap<String, Instant> = HashMap::new();
        while ready.len() < pods {
            let ev = w
                .next()
                .await
                .expect("pod watch")
                .expect("the pod watch ended early");
            let obj = &ev["object"];
            if ready_condition(obj) {
                let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
                ready.entry(name).or_insert_with(Instant::now);
            }
        }
        ready
    });
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let start = Instant::now();
    let creates = stats::run(concurrency, pods, {
        let (client, created) = (client.clone(), created.clone());
        move |i| {
            let (client, created) = (client.clone(), created.clone());
            async move {
                let pod = bench_pod(i);
                let name = pod["metadata"]["name"].as_str().unwrap().to_string();
                created.lock().unwrap().insert(name, Instant::now());
                client
                    .ok("POST", "/api/v1/namespaces/default/pods", Some(&pod))
                    .await
                    .expect("create pod");
            }
        }
    })
    .await;
    let ready = tokio::time::timeout(Duration::from_secs(600), watcher)
        .await
        .unwrap_or_else(|_| panic!("not all {pods} pods Ready within 600 s"))
        .expect("pod watcher");
    let all_ready = start.elapsed();
    let created = created.lock().unwrap();
    let lat = created
        .iter()
        .map(|(name, t)| ready[name].duration_since(*t))
        .collect();
    (
        Load {
            ops: creates.ops,
            secs: all_ready.as_secs_f64(),
            lat,
        },
        all_ready,
    )
}

fn measure(lab: &TwoNodeLab) -> Report {
    let pods = env_usize("BENCH_PODS", 100);
    let concurrency = env_usize("BENCH_CONCURRENCY", 10);
    let settle = Duration::from_secs(env_usize("BENCH_SETTLE", 20) as u64);
    let max_pods = format!("max-pods={}", pods + 50);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut r = Report {
        pods,
        concurrency,
        ..Report::default()
    };

    let spawned = Instant::now();
    let (mut server, _k) = lab.start_server(&["--kubelet-arg", &max_pods]);
    r.server_ready = rt.block_on(async {
        node_ready(&connect(&server).await, A)
            .await
            .duration_since(spawned)
    });
    add_images(&mut server);
    let client = rt.block_on(connect(&server));
    let (mut agent, spawned) = lab.start_agent(&server);
    r.agent_ready = rt.block_on(async { node_ready(&client, B).await.duration_since(spawned) });
    rt.block_on(node_ready(&client, A));

    std::thread::sleep(settle);
    server.assert_running();
    agent.assert_running();
    let (server_pid, agent_pid) = (server.pid(), agent.pid());
    r.server_rss = rss_of(server_pid);
    r.server_containerd_rss = rss_of(server_pid.and_then(containerd_of));
    r.agent_rss = rss_of(agent_pid);
    r.agent_containerd_rss = rss_of(agent_pid.and_then(containerd_of));
    r.server_split = rss_split(server_pid);
    r.agent_split = rss_split(agent_pid);

    (r.startup, r.all_ready) = rt.block_on(pod_startup(client, pods, concurrency));
    r.server_rss_loaded = rss_of(server_pid);
    r.server_containerd_loaded = rss_of(server_pid.and_then(containerd_of));
    server.assert_running();
    r
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn mib(v: f64) -> String {
    format!("{v:.1} MiB")
}

fn table(r: &Report) -> String {
    let p50 = r.startup.pct(50) / 1000.0;
    let p99 = r.startup.pct(99) / 1000.0;
    let k3rs_cluster = r.server_rss + r.server_containerd_rss;
    let k3rs_agent = r.agent_rss + r.agent_containerd_rss;
    let rows = [
        (
            "`k3rs server` start → its node Ready (fresh data dir, no image tarballs)".to_string(),
            secs(r.server_ready),
            "–".to_string(),
            "< 3 s",
        ),
        (
            "`k3rs agent` start → its node Ready (fresh data dir, join by token to a just-restarted server, pause + busybox tarballs imported in the background)".into(),
            secs(r.agent_ready),
            "–".into(),
            "< 3 s",
        ),
        (
            format!(
                "pod startup, create → Ready via watch, p50 ({} pods, {} concurrent)",
                r.pods, r.concurrency
            ),
            format!("{p50:.2} s"),
            "–".into(),
            "–",
        ),
        (
            "pod startup p99".into(),
            format!("{p99:.2} s"),
            "≤ 5 s (Kubernetes pod startup SLO)".into(),
            "< 1 s",
        ),
        (
            format!("all {} pods Ready after the first create", r.pods),
            secs(r.all_ready),
            "–".into(),
            "–",
        ),
        (
            "server process RSS at idle (API server, datastore, controllers, embedded agent)"
                .into(),
            mib_split(r.server_rss, r.server_split),
            "–".into(),
            "–",
        ),
        (
            "server's containerd RSS at idle".into(),
            mib(r.server_containerd_rss),
            "–".into(),
            "–",
        ),
        (
            "server + containerd at idle".into(),
            mib(k3rs_cluster),
            format!("{K3S_CLUSTER_MB:.0} M (cluster with a single agent) [1]"),
            "–",
        ),
        (
            format!("server + containerd with {} pods running", r.pods),
            mib(r.server_rss_loaded + r.server_containerd_loaded),
            "1606 M (server with a workload) [1]".into(),
            "–",
        ),
        (
            "agent process RSS at idle (`k3rs agent`, separate process)".into(),
            mib_split(r.agent_rss, r.agent_split),
            "–".into(),
            "< 30 MB",
        ),
        (
            "agent's containerd RSS at idle".into(),
            mib(r.agent_containerd_rss),
            "–".into(),
            "–",
        ),
        (
            "agent + containerd at idle".into(),
            mib(k3rs_agent),
            format!("{K3S_AGENT_MB:.0} M (agent) [1]"),
            "–",
        ),
    ];
    let mut out =
        String::from("| measure | k3rs | k3s / Kubernetes | k3rs goal |\n|---|---|---|---|\n");
    for (what, ours, theirs, goal) in rows {
        out += &format!("| {what} | {ours} | {theirs} | {goal} |\n");
    }
    out += &format!(
        "\n[1] {K3S_PROFILE}: k3s v1.26.5 with embedded etcd on an Intel 8375C, minimum RAM \
         including containerd (95th percentile at steady state, with Prometheus, Grafana and an \
         example app). k3rs: RSS from `/proc/<pid>/status` (MiB), no monitoring stack, no pods \
         at idle. Server+containerd vs. the k3s cluster row: {}; agent+containerd vs. k3s agent: {}.\n",
        stats::ratio(k3rs_cluster, K3S_CLUSTER_MB),
        stats::ratio(k3rs_agent, K3S_AGENT_MB),
    );
    out
}

fn main() {
    assert!(
        rustix::process::getuid().is_root(),
        "the agent benchmark runs containers in network namespaces it creates: run it as root"
    );
    let lab = TwoNodeLab::new("bn");
    let report = lab.a.inside(|| measure(&lab));
    let commit = stats::commit();
    let mut out = format!(
        "## Node agent benchmark (k3rs {commit}, {} build)\n\n\
         `cargo bench --bench agent` (root): `k3rs server` with its embedded agent and a \
         `k3rs agent` joined by token, each in its own network namespace over a veth, real \
         containerd/runc/CNI, on one machine ({}) shared by both nodes, the client and the \
         pods. Goals: issue 7.\n\n",
        stats::k3rs_build(),
        stats::machine(),
    );
    out += &table(&report);
    println!("{out}");
    stats::write_result("agent", &out);
}
