//! Killing a real agent moves its pods: `k3rs server` (embedded agent, node gw-a) and
//! `k3rs agent` joined by token (node gw-b), each in its own network namespace over a veth
//! (`tests/common/two_node_lab.rs`). A Deployment runs on gw-b (gw-a cordoned while it starts,
//! then uncordoned); its pods tolerate `node.kubernetes.io/unreachable` and `not-ready`
//! (NoExecute) for 5 s. SIGKILLing the agent (its containerd and the pods keep running, as
//! with a dead kubelet upstream; the lab kills them at the end) makes gw-b's Ready condition
//! `Unknown` (reason `NodeStatusUnknown`) once the node monitor grace period (15 s here, above
//! the 10 s Lease renewal) runs out, taints it `unreachable:NoExecute`, evicts the pods after
//! their toleration, and the Deployment is available again with its pods on gw-a. The evicted
//! pods stay Terminating: no kubelet is left to confirm their end.
//!
//! As root, with the images of `scripts/build-images.sh`; missing prerequisites fail the test.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, pod_ready, Kubectl};
use crate::common::two_node_lab::{TwoNodeLab, TwoNodes, A, B};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);

const WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 5}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 5}
      containers:
      - name: httpd
        image: docker.io/library/busybox:1.35
        command: [sh, -c, "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 80 -h /www"]
"#;

/// Every pod of the Deployment: (name, node, being deleted, ready).
fn pods(k: &Kubectl) -> Vec<(String, String, bool, bool)> {
    let list = json(k, &["get", "pods", "-l", "app=web", "-o", "json"]);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
                p["metadata"].get("deletionTimestamp").is_some(),
                pod_ready(p),
            )
        })
        .collect()
}

fn available(k: &Kubectl) -> i64 {
    json(k, &["get", "deployment", "web", "-o", "json"])["status"]["availableReplicas"]
        .as_i64()
        .unwrap_or(0)
}

fn condition(node: &Value, kind: &str) -> Option<Value> {
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

#[test]
fn killing_the_agent_moves_its_pods_to_the_server_node() {
    let lab = TwoNodeLab::new("fo");
    lab.a.inside(|| scenario(&lab));
}

fn scenario(lab: &TwoNodeLab) {
    let TwoNodes {
        mut server,
        k,
        mut agent,
        ..
    } = lab.start(&["--kube-controller-manager-arg=node-monitor-grace-period=15s"]);

    // The Deployment's pods start on gw-b.
    k.ok(&["cordon", A]);
    k.ok_stdin(&["apply", "-f", "-"], Some(WEB));
    common::wait_for("2 available replicas on gw-b", WAIT, || {
        server.assert_running();
        agent.assert_running();
        (available(&k) == 2).then_some(())
    });
    let before = pods(&k);
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(before.iter().all(|p| p.1 == B && p.3), "{before:?}");
    k.ok(&["uncordon", A]);

    // The agent dies without a word; its containerd and the pods' processes live on.
    agent.kill();
    assert!(
        !lab.b.processes().is_empty(),
        "containerd and the pods outlive the agent"
    );

    let (ready, taints) = common::wait_for("gw-b Unknown and tainted unreachable", WAIT, || {
        server.assert_running();
        let node = json(&k, &["get", "node", B, "-o", "json"]);
        let ready = condition(&node, "Ready")?;
        let taints = node["spec"]["taints"].as_array()?.clone();
        let unreachable = taints
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/unreachable" && t["effect"] == "NoExecute");
        (ready["status"] == "Unknown" && unreachable).then_some((ready, taints))
    });
    assert_eq!(ready["reason"], "NodeStatusUnknown", "{ready}");
    assert_eq!(ready["message"], "Kubelet stopped posting node status.");
    assert!(
        !taints
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/not-ready"),
        "an unreachable node is not also tainted not-ready: {taints:?}"
    );
    let node = json(&k, &["get", "node", B, "-o", "json"]);
    for kind in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
        let c = condition(&node, kind).unwrap_or_else(|| panic!("{kind} on {node}"));
        assert_eq!(c["status"], "Unknown", "{c}");
    }
    // The server's own node is untouched.
    let node_a = json(&k, &["get", "node", A, "-o", "json"]);
    assert_eq!(
        condition(&node_a, "Ready").expect("Ready")["status"],
        "True"
    );

    let after = common::wait_for("2 available replicas again, on gw-a", WAIT, || {
        server.assert_running();
        let live: Vec<_> = pods(&k).into_iter().filter(|p| !p.2).collect();
        let moved = live.len() == 2 && live.iter().all(|p| p.1 == A && p.3);
        (moved && available(&k) == 2).then_some(live)
    });
    assert!(
        after.iter().all(|p| !before.iter().any(|b| b.0 == p.0)),
        "new pods replace the evicted ones: {before:?} -> {after:?}"
    );
    // The evicted pods are marked for deletion and stay so with their kubelet gone.
    let evicted: Vec<_> = pods(&k).into_iter().filter(|p| p.1 == B).collect();
    assert_eq!(evicted.len(), 2, "{evicted:?}");
    assert!(evicted.iter().all(|p| p.2), "{evicted:?}");
    let log = server.log();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
}
