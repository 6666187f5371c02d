//! The disruption controller against the real binary, real kubectl and hollow nodes: a
//! PodDisruptionBudget's status follows its pods and the Deployment's scale (minAvailable,
//! maxUnavailable as a percentage), with upstream's `DisruptionAllowed` condition, and
//! `kubectl drain` of a hollow node evicts through it — one pod at a time while the budget
//! allows, and not at all when it does not.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common;
use crate::common::hollow::HollowAgent;
use crate::common::kubectl::{pod_ready, wait_json, Kubectl};
use serde_json::Value;

const NODES: [&str; 2] = ["pdb-0", "pdb-1"];

const WORKLOAD: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: "busybox:1.36"}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
"#;

const VIOLATION: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// The nodes of the live, ready `app=web` pods (one entry per pod), once there are 3.
fn wait_web_on(k: &Kubectl, nodes: &[&str]) -> Vec<String> {
    let want: BTreeSet<&str> = nodes.iter().copied().collect();
    let what = format!("3 ready web pods on {nodes:?}");
    let pods = wait_json(k, &what, &["get", "pods", "-l", "app=web"], |v| {
        let live: Vec<&Value> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect();
        live.len() == 3
            && live.iter().all(|p| {
                pod_ready(p) && want.contains(p["spec"]["nodeName"].as_str().unwrap_or(""))
            })
    });
    pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until the budget's status has `want` for its current generation and returns it.
fn wait_budget(k: &Kubectl, want: &[(&str, i64)], reason: &str) -> Value {
    let what = format!("pdb web status {want:?} {reason}");
    wait_json(k, &what, &["get", "pdb", "web"], |b| {
        let st = &b["status"];
        let condition = st["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "DisruptionAllowed");
        want.iter().all(|(f, v)| st[*f] == *v)
            && st["observedGeneration"] == b["metadata"]["generation"]
            && condition.is_some_and(|c| c["reason"] == reason)
    })["status"]
        .clone()
}

/// Merge-patches the budget's spec with `spec`.
fn patch_budget(k: &Kubectl, spec: &str) {
    let p = format!(r#"{{"spec":{spec}}}"#);
    k.ok(&["patch", "pdb", "web", "--type=merge", "-p", &p]);
}

#[test]
fn budgets_follow_their_pods_and_drain_respects_them() {
    let (_server, k) = Kubectl::start_server(&[]);
    let mut agent = HollowAgent::start(&k.kubeconfig, NODES.len(), "pdb-", &[]);
    common::wait_for("2 Ready hollow nodes", Duration::from_secs(60), || {
        agent.proc.assert_running();
        let rows = common::kubectl::table(&k.run(&["get", "nodes", "--no-headers"]).stdout);
        NODES
            .iter()
            .all(|n| rows.iter().any(|r| r[0] == *n && r[1] == "Ready"))
            .then_some(())
    });
    // Everything starts on pdb-0.
    k.ok(&["cordon", "pdb-1"]);
    k.ok_stdin(&["apply", "-f", "-"], Some(WORKLOAD));
    let first = wait_web_on(&k, &["pdb-0"]);
    let st = wait_budget(
        &k,
        &[
            ("expectedPods", 3),
            ("desiredHealthy", 2),
            ("currentHealthy", 3),
            ("disruptionsAllowed", 1),
        ],
        "SufficientPods",
    );
    assert_eq!(st["conditions"][0]["status"], "True", "{st}");
    let rows = common::kubectl::table(&k.ok(&["get", "pdb", "web"]));
    assert_eq!(rows[1][..4], ["web", "2", "N/A", "1"], "{rows:?}");

    // Draining pdb-0 evicts one pod at a time: the others are refused until the
    // replacement on pdb-1 is ready.
    k.ok(&["uncordon", "pdb-1"]);
    let drain = k.run(&["drain", "pdb-0", "--timeout=120s"]);
    assert!(drain.ok, "{drain:?}");
    assert!(drain.stderr.contains(VIOLATION), "{drain:?}");
    for pod in &first {
        assert!(
            drain.stdout.contains(&format!("pod/{pod} evicted")),
            "{drain:?}"
        );
    }
    wait_web_on(&k, &["pdb-1"]);
    wait_budget(
        &k,
        &[("currentHealthy", 3), ("disruptionsAllowed", 1)],
        "SufficientPods",
    );

    // A budget that allows nothing: the drain gives up and every pod stays.
    patch_budget(&k, r#"{"minAvailable":3}"#);
    let st = wait_budget(
        &k,
        &[("desiredHealthy", 3), ("disruptionsAllowed", 0)],
        "InsufficientPods",
    );
    assert_eq!(st["conditions"][0]["status"], "False", "{st}");
    assert_eq!(st["observedGeneration"], 2, "{st}");
    let stay = wait_web_on(&k, &["pdb-1"]);
    let drain = k.run(&["drain", "pdb-1", "--timeout=8s"]);
    assert!(!drain.ok, "{drain:?}");
    assert!(drain.stderr.contains(VIOLATION), "{drain:?}");
    assert_eq!(wait_web_on(&k, &["pdb-1"]), stay);

    // maxUnavailable as a percentage scales from the Deployment's replicas: 34% of 3 is 2.
    patch_budget(&k, r#"{"minAvailable":null,"maxUnavailable":"34%"}"#);
    wait_budget(
        &k,
        &[
            ("expectedPods", 3),
            ("desiredHealthy", 1),
            ("disruptionsAllowed", 2),
        ],
        "SufficientPods",
    );
    k.ok(&["scale", "deployment", "web", "--replicas=2"]);
    wait_budget(
        &k,
        &[
            ("expectedPods", 2),
            ("desiredHealthy", 1),
            ("currentHealthy", 2),
            ("disruptionsAllowed", 1),
        ],
        "SufficientPods",
    );
    drop(agent);
}
