//! A burst of pods on one real node: `k3rs server` with its embedded agent in a network
//! namespace the benchmark makes (loopback only), real containerd, runc and CNI, the images of
//! `scripts/build-images.sh` imported (like the SLO's "excluding image pulls"). One Deployment
//! of `BENCH_PODS` (100) busybox pods pinned to the node is created; a watch on its pods
//! records, per pod, when it was first seen (created by the ReplicaSet controller), bound,
//! Running and Ready. Prints pods/s (pods Ready / time from the Deployment's create to the last
//! Ready) and the p50/p90/p99/max of each pod's startup (first seen → Ready, as upstream's
//! pod startup SLO measures it: creation → Running and Ready, observed by a watch), and the
//! same for its phases, next to the Kubernetes pod startup SLO (p99 ≤ 5 s).
//!
//! `BENCH_LOG=<file>` keeps the server's log (`K3RS_LOG` is passed on, default
//! `info,k3rs_agent=debug`) for profiling. Writes the table to `benches/results/pod_burst.md`
//! (or `$BENCH_OUT`).
//!
//! Run (as root): `cargo bench --bench pod_burst`.

// A benchmark: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::time::{Duration, Instant};

use common::kube::{KubeClient, Kubeconfig};
use common::node_lab::NodeLab;
use common::stats::{self, env_usize, Load};
use serde_json::{json, Value};

const NODE: &str = "burst-1";

/// When the watch saw each step of one pod.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    created: Option<Instant>,
    bound: Option<Instant>,
    running: Option<Instant>,
    ready: Option<Instant>,
}

fn condition_true(obj: &Value, kind: &str) -> bool {
    obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

fn deployment(replicas: usize) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "burst"},
        "spec": {"replicas": replicas,
            "selector": {"matchLabels": {"app": "burst"}},
            "template": {"metadata": {"labels": {"app": "burst"}},
                "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "sleep", "image": "docker.io/library/busybox:1.35",
                        "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"]}]}}}})
}

/// Watches nodes until `NODE` is Ready.
async fn node_ready(client: &KubeClient) {
    let mut w = client.watch("/api/v1/nodes?watch=1").await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let ev = tokio::time::timeout_at(deadline, w.next())
            .await
            .expect("the node not Ready within 180 s")
            .unwrap()
            .expect("the node watch ended");
        let obj = &ev["object"];
        if obj["metadata"]["name"] == NODE && condition_true(obj, "Ready") {
            return;
        }
    }
}

struct Burst {
    pods: usize,
    seen: HashMap<String, Seen>,
    total: Duration,
    /// CPU seconds the burst cost, by process name (see [`cpu_by_name`]).
    cpu: BTreeMap<String, f64>,
}

/// CPU seconds (user + system, with those of reaped children: runc and the CNI plugins count
/// for the containerd or shim that ran them) of `pids`, summed by process name.
fn cpu_by_name(pids: &[i32]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for pid in pids {
        let Some((comm, secs)) = u32::try_from(*pid).ok().and_then(stats::proc_cpu) else {
            continue;
        };
        *out.entry(comm).or_default() += secs.iter().sum::<f64>();
    }
    out
}

/// How long the burst may go without a pod getting bound, Running or Ready before the run
/// fails (a runtime that cannot start sandboxes would otherwise hold it for 900 s).
const STALL: Duration = Duration::from_secs(120);

/// The last ten Warning events of the namespace, one per line (for a stalled run's message).
async fn warnings(client: &KubeClient) -> String {
    let path = "/api/v1/namespaces/default/events?fieldSelector=type%3DWarning";
    let Ok(list) = client.ok("GET", path, None).await else {
        return "(could not list events)".to_string();
    };
    let mut items = list["items"].as_array().cloned().unwrap_or_default();
    let last_seen = |e: &Value| e["lastTimestamp"].as_str().unwrap_or_default().to_string();
    items.sort_by_key(last_seen);
    let lines: Vec<String> = items
        .iter()
        .rev()
        .take(10)
        .map(|e| {
            let what = &e["involvedObject"]["name"];
            format!("{what} {} x{}: {}", e["reason"], e["count"], e["message"])
        })
        .collect();
    lines.join("\n")
}

/// Creates the Deployment and watches its pods until all are Ready; `procs` lists the lab's
/// processes (for the CPU they spent).
async fn burst(client: &KubeClient, pods: usize, procs: impl Fn() -> Vec<i32>) -> Burst {
    let list = client
        .ok(
            "GET",
            "/api/v1/namespaces/default/pods?labelSelector=app%3Dburst",
            None,
        )
        .await
        .unwrap();
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    let mut w = client
        .watch(&format!(
            "/api/v1/namespaces/default/pods?watch=1&labelSelector=app%3Dburst&resourceVersion={rv}"
        ))
        .await
        .unwrap();
    let cpu_before = cpu_by_name(&procs());
    let start = Instant::now();
    client
        .ok(
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            Some(&deployment(pods)),
        )
        .await
        .unwrap();
    let mut seen: HashMap<String, Seen> = HashMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(900);
    let mut progress = tokio::time::Instant::now();
    while seen.values().filter(|s| s.ready.is_some()).count() < pods {
        let ev = match tokio::time::timeout_at(deadline.min(progress + STALL), w.next()).await {
            Ok(ev) => ev.unwrap().expect("the pod watch ended early"),
            Err(_) => panic!(
                "{} of {pods} pods Ready; none moved for {STALL:?} (or 900 s passed). Latest \
                 warnings:\n{}",
                seen.values().filter(|s| s.ready.is_some()).count(),
                warnings(client).await
            ),
        };
        let now = Instant::now();
        let obj = &ev["object"];
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        let s = seen.entry(name).or_default();
        let before = (s.bound, s.running, s.ready);
        s.created.get_or_insert(now);
        if obj["spec"]["nodeName"].is_string() {
            s.bound.get_or_insert(now);
        }
        if obj["status"]["phase"] == "Running" {
            s.running.get_or_insert(now);
        }
        if condition_true(obj, "Ready") {
            s.ready.get_or_insert(now);
        }
        if before != (s.bound, s.running, s.ready) {
            progress = tokio::time::Instant::now();
        }
    }
    let total = start.elapsed();
    let mut cpu = cpu_by_name(&procs());
    for (name, before) in cpu_before {
        if let Some(v) = cpu.get_mut(&name) {
            *v -= before;
        }
    }
    Burst {
        pods,
        total,
        seen,
        cpu,
    }
}

/// The samples `to - from` of the pods that have both.
fn phase(b: &Burst, from: fn(&Seen) -> Option<Instant>, to: fn(&Seen) -> Option<Instant>) -> Load {
    let lat: Vec<Duration> = b
        .seen
        .values()
        .filter_map(|s| Some(to(s)?.saturating_duration_since(from(s)?)))
        .collect();
    Load {
        ops: lat.len(),
        secs: b.total.as_secs_f64(),
        lat,
    }
}

fn table(b: &Burst) -> String {
    let mut out = format!(
        "{} pods Ready {:.2} s after the Deployment's create: **{:.1} pods/s**\n\n\
         | phase (watch-observed) | p50 | p90 | p99 | max | SLO |\n|---|---|---|---|---|---|\n",
        b.pods,
        b.total.as_secs_f64(),
        b.pods as f64 / b.total.as_secs_f64(),
    );
    let rows: [(&str, Load, &str); 4] = [
        (
            "**startup: created → Ready**",
            phase(b, |s| s.created, |s| s.ready),
            "p99 ≤ 5 s",
        ),
        ("created → bound", phase(b, |s| s.created, |s| s.bound), ""),
        ("bound → Running", phase(b, |s| s.bound, |s| s.running), ""),
        ("Running → Ready", phase(b, |s| s.running, |s| s.ready), ""),
    ];
    for (what, load, slo) in rows {
        let s = |p: usize| format!("{:.2} s", load.pct(p) / 1000.0);
        out += &format!(
            "| {what} | {} | {} | {} | {} | {slo} |\n",
            s(50),
            s(90),
            s(99),
            s(100)
        );
    }
    let mut cpu: Vec<(&String, &f64)> = b.cpu.iter().filter(|(_, v)| **v >= 0.05).collect();
    cpu.sort_by(|a, b| b.1.total_cmp(a.1));
    out += "\nCPU seconds spent during the burst, by process (children reaped count for \
            their parent):\n\n| process | CPU s |\n|---|---|\n";
    for (name, secs) in cpu {
        out += &format!("| {name} | {secs:.1} |\n");
    }
    out
}

fn main() {
    assert!(
        rustix::process::getuid().is_root(),
        "the pod burst benchmark runs containers in a network namespace it creates: run it as root"
    );
    let pods = env_usize("BENCH_PODS", 100);
    let log_filter =
        std::env::var("K3RS_LOG").unwrap_or_else(|_| "info,k3rs_agent=debug".to_string());
    let lab = NodeLab::new("burst");
    let b = lab.inside(|| {
        let max_pods = format!("max-pods={}", pods + 50);
        let (mut server, _k) = lab.start_server(
            NODE,
            "127.0.0.1",
            &["--kubelet-arg", &max_pods],
            &[("K3RS_LOG", OsStr::new(&log_filter))],
        );
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let b = rt.block_on(async {
            let cfg = Kubeconfig::read(&server.kubeconfig()).unwrap();
            let client = KubeClient::connect(&cfg).await.unwrap();
            node_ready(&client).await;
            burst(&client, pods, || lab.processes()).await
        });
        server.assert_running();
        if let Ok(keep) = std::env::var("BENCH_LOG") {
            std::fs::copy(server.log_path(), keep).unwrap();
        }
        b
    });
    let mut out = format!(
        "## Pod burst benchmark (k3rs {}, {} build)\n\n\
         `cargo bench --bench pod_burst` (root): one Deployment of {pods} busybox pods on one \
         real node (`k3rs server` with its embedded agent, containerd, runc, CNI, images \
         imported), on {}.\n\n",
        stats::commit(),
        stats::k3rs_build(),
        stats::machine(),
    );
    out += &table(&b);
    println!("{out}");
    stats::write_result("pod_burst", &out);
}
