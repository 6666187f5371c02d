//! A node that stops heartbeating loses its pods to the other nodes: with two hollow agents,
//! SIGKILLing the one whose node runs a Deployment's pods turns that node Unknown, taints it
//! `node.kubernetes.io/unreachable:NoExecute`, and once the pods' default toleration (from the
//! DefaultTolerationSeconds admission plugin, here 5 s) runs out they are evicted and the
//! Deployment is available again on the surviving node.

use std::time::Duration;

use crate::common::hollow::HollowAgent;
use crate::common::kubectl::Kubectl;
use crate::common::wait_for;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(90);

fn get_json(k: &Kubectl, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&k.ok(&all)).expect("json")
}

fn hollow(k: &Kubectl, prefix: &str) -> HollowAgent {
    HollowAgent::start(
        &k.kubeconfig,
        1,
        prefix,
        &["--node-lease-renew-interval", "1s"],
    )
}

fn wait_ready_node(k: &Kubectl, name: &str) {
    wait_for(&format!("node {name} Ready"), WAIT, || {
        let out = k.run(&[
            "get",
            "node",
            name,
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
        ]);
        (out.stdout == "True").then_some(())
    });
}

/// `(node, deleting)` of every pod of the Deployment.
fn pods(k: &Kubectl) -> Vec<(String, bool)> {
    let list = get_json(k, &["get", "pods", "-l", "app=web"]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
                p["metadata"].get("deletionTimestamp").is_some(),
            )
        })
        .collect()
}

fn available(k: &Kubectl) -> i64 {
    let d = get_json(k, &["get", "deployment", "web"]);
    d["status"]["availableReplicas"].as_i64().unwrap_or(0)
}

#[test]
fn pods_of_a_silent_node_are_replaced_elsewhere_after_their_toleration() {
    let (_server, k) = Kubectl::start_server(&[
        "--kube-controller-manager-arg=node-monitor-grace-period=4s",
        "--kube-apiserver-arg=default-unreachable-toleration-seconds=5",
    ]);
    let mut doomed = hollow(&k, "doomed-");
    wait_ready_node(&k, "doomed-0");

    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    k.ok_stdin(&["apply", "-f", "-"], Some(&deployment.to_string()));
    wait_for("3 available replicas on doomed-0", WAIT, || {
        doomed.proc.assert_running();
        (available(&k) == 3).then_some(())
    });
    assert!(pods(&k).iter().all(|(n, _)| n == "doomed-0"));
    let one = get_json(&k, &["get", "pods", "-l", "app=web"])["items"][0].clone();
    let tolerations = one["spec"]["tolerations"].as_array().unwrap().clone();
    assert!(
        tolerations.contains(&json!({"key": "node.kubernetes.io/unreachable",
            "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5})),
        "{tolerations:?}"
    );

    let mut survivor = hollow(&k, "survivor-");
    wait_ready_node(&k, "survivor-0");
    // The survivor's arrival moves nothing.
    assert!(pods(&k).iter().all(|(n, d)| n == "doomed-0" && !d));

    // The doomed node's kubelet dies without a word.
    doomed.proc.kill();
    wait_for("doomed-0 Unknown and tainted unreachable", WAIT, || {
        let node = get_json(&k, &["get", "node", "doomed-0"]);
        let ready = node["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")?
            .clone();
        let tainted = node["spec"]["taints"]
            .as_array()?
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/unreachable" && t["effect"] == "NoExecute");
        (ready["status"] == "Unknown" && tainted).then_some(())
    });
    wait_for(
        "3 available replicas again, all on survivor-0",
        WAIT,
        || {
            survivor.proc.assert_running();
            let live: Vec<String> = pods(&k)
                .into_iter()
                .filter(|(_, deleting)| !deleting)
                .map(|(n, _)| n)
                .collect();
            let moved = live.len() == 3 && live.iter().all(|n| n == "survivor-0");
            (moved && available(&k) == 3).then_some(())
        },
    );
    // The evicted pods are marked for deletion; with their kubelet gone they stay Terminating.
    let evicted = pods(&k)
        .into_iter()
        .filter(|(n, _)| n == "doomed-0")
        .collect::<Vec<_>>();
    assert_eq!(evicted.len(), 3, "{evicted:?}");
    assert!(evicted.iter().all(|(_, deleting)| *deleting), "{evicted:?}");
}
