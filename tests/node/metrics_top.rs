//! The built-in metrics API with real pods: `kubectl top nodes` and `kubectl top pods -A
//! --containers` print the node's and every running container's CPU and memory (scraped from
//! the kubelet every `--metric-resolution`), and an autoscaler made by `kubectl autoscale
//! --cpu-percent=50` scales a CPU-burning Deployment up, then (its pods done burning, with a
//! zero scale-down stabilization window) back down.
//! As root, inside a network namespace the test makes (loopback only), with the images of
//! `scripts/build-images.sh`. Missing prerequisites fail the test.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, table, Kubectl};
use crate::common::node_lab::{NodeLab, FAST_STATUS};

const NODE: &str = "top-node";

/// Each pod burns a CPU for `BURN` seconds after its start, then idles; a second pod idles
/// with two containers.
const BURN: u64 = 50;

fn workloads() -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: burner}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: burner}}}}
  template:
    metadata: {{labels: {{app: burner}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: burn
        image: docker.io/library/busybox:1.35
        resources: {{requests: {{cpu: 20m}}}}
        command: [sh, -c, "end=$(( $(date +%s) + {BURN} )); while [ $(date +%s) -lt $end ]; do :; done; exec sleep 36000"]
---
apiVersion: v1
kind: Pod
metadata: {{name: pair}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {{name: first, image: docker.io/library/busybox:1.35, command: [sleep, "36000"]}}
  - {{name: second, image: docker.io/library/busybox:1.35, command: [sleep, "36000"]}}
"#
    )
}

/// Milli-cores of a `kubectl top` CPU cell (`123m`, or whole cores).
fn millicores(cell: &str) -> u64 {
    match cell.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or_else(|_| panic!("cpu cell {cell:?}")),
        None => {
            cell.parse::<u64>()
                .unwrap_or_else(|_| panic!("cpu cell {cell:?}"))
                * 1000
        }
    }
}

/// The MiB of a `kubectl top` memory cell (`12Mi`).
fn mebibytes(cell: &str) -> u64 {
    cell.strip_suffix("Mi")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("memory cell {cell:?}"))
}

fn replicas(k: &Kubectl) -> u64 {
    json(k, &["get", "deployment", "burner"])["spec"]["replicas"]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn kubectl_top_and_the_autoscaler_follow_the_pods_usage() {
    NodeLab::run("top", scenario);
}

fn scenario(lab: &NodeLab) {
    let mut args = FAST_STATUS.to_vec();
    args.extend(["--metric-resolution", "5s"]);
    let (mut server, k) = lab.start_server(NODE, "127.0.0.1", &args, &[]);
    k.ok_stdin(&["apply", "-f", "-"], Some(&workloads()));
    k.ok(&["rollout", "status", "deployment/burner", "--timeout=150s"]);
    k.ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/pair",
        "--timeout=150s",
    ]);

    // kubectl top nodes: the node with CPU, CPU%, memory, memory%.
    let nodes = common::wait_for("kubectl top nodes", Duration::from_secs(90), || {
        server.assert_running();
        let out = k.run(&["top", "nodes", "--no-headers"]);
        out.ok.then_some(out.stdout)
    });
    let row = table(&nodes).into_iter().find(|r| r[0] == NODE);
    let row = row.unwrap_or_else(|| panic!("{NODE} in {nodes}"));
    assert_eq!(row.len(), 5, "{nodes}");
    assert!(millicores(&row[1]) > 0, "{nodes}");
    assert!(row[2].ends_with('%') && row[4].ends_with('%'), "{nodes}");
    assert!(mebibytes(&row[3]) > 0, "{nodes}");

    // kubectl top pods -A --containers: every container of the running pods, the burner busy.
    let pods = common::wait_for("kubectl top pods", Duration::from_secs(90), || {
        server.assert_running();
        let out = k.run(&["top", "pods", "-A", "--containers", "--no-headers"]);
        let rows = table(&out.stdout);
        let has = |pod: &str, c: &str| {
            rows.iter()
                .any(|r| r.len() == 5 && r[0] == "default" && r[1].starts_with(pod) && r[2] == c)
        };
        (out.ok && has("burner-", "burn") && has("pair", "first") && has("pair", "second"))
            .then_some(rows)
    });
    for r in &pods {
        mebibytes(&r[4]);
    }
    let burn = pods.iter().find(|r| r[2] == "burn").unwrap();
    assert!(
        millicores(&burn[3]) >= 100,
        "a busy loop uses a good part of a core: {pods:?}"
    );
    let idle = pods.iter().find(|r| r[2] == "first").unwrap();
    assert!(
        millicores(&idle[3]) < 50,
        "sleep uses next to nothing: {pods:?}"
    );
    // The API's own numbers: a working set in bytes for each container, CPU in nano-cores.
    let pair: serde_json::Value = serde_json::from_str(&k.ok(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/pair",
    ]))
    .unwrap();
    assert_eq!(pair["kind"], "PodMetrics", "{pair}");
    let names: Vec<&str> = pair["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["first", "second"], "{pair}");
    for c in pair["containers"].as_array().unwrap() {
        let memory = c["usage"]["memory"].as_str().unwrap();
        assert!(!memory.starts_with('0'), "a working set: {pair}");
        assert!(c["usage"]["cpu"].as_str().is_some(), "{pair}");
    }
    // About one --metric-resolution (the kubelet's sample times, not the scrape's).
    let window: f64 = pair["window"]
        .as_str()
        .and_then(|w| w.strip_suffix('s'))
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("window in {pair}"));
    assert!((3.0..=8.0).contains(&window), "{pair}");

    // The autoscaler: 50 % of 20m is far below what the loop uses → up to the maximum.
    k.ok(&[
        "autoscale",
        "deployment",
        "burner",
        "--cpu-percent=50",
        "--min=1",
        "--max=3",
    ]);
    k.ok(&[
        "patch",
        "hpa",
        "burner",
        "--type=merge",
        "-p",
        r#"{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":0}}}}"#,
    ]);
    common::wait_for("scaled up to 3", Duration::from_secs(120), || {
        server.assert_running();
        (replicas(&k) == 3).then_some(())
    });
    // Every pod stops burning BURN seconds after its start: back down to the minimum.
    common::wait_for("scaled back down to 1", Duration::from_secs(240), || {
        server.assert_running();
        (replicas(&k) == 1).then_some(())
    });
    let hpa = json(&k, &["get", "hpa", "burner"]);
    assert_eq!(hpa["status"]["desiredReplicas"], 1, "{hpa}");
    let events = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=SuccessfulRescale",
    ]);
    assert!(
        events.contains(
            "New size: 3; reason: cpu resource utilization (percentage of request) above target"
        ),
        "{events}"
    );
    assert!(
        events.contains("New size: 1; reason: All metrics below target"),
        "{events}"
    );
}
